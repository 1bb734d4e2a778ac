import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** What the benches read from /proc (Linux): process trees, their memory and their CPU time. */

/** `/proc/<pid>/stat` after the command name: [state, ppid, ...]; utime and stime are fields 11 and 12 of it. */
function procStat(pid: number | string): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null; /* gone */
  }
}

/** Every process id on the machine. */
const allPids = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d));

/** `root` and every process below it (node:cluster workers). */
export function treePids(root: number): number[] {
  const parent = new Map<number, number>();
  for (const d of allPids()) {
    const stat = procStat(d);
    if (stat) parent.set(Number(d), Number(stat[1]));
  }
  const pids: number[] = [];
  for (const pid of parent.keys()) {
    let p: number | undefined = pid;
    while (p !== undefined && p !== root && p > 1) p = parent.get(p);
    if (p === root) pids.push(pid);
  }
  return pids;
}

/** This machine's PostgreSQL processes (postmaster and backends), when the database runs here. */
export function postgresPids(): number[] {
  return allPids()
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres';
      } catch {
        return false; /* gone */
      }
    })
    .map(Number);
}

/** VmRSS of `root` and every process below it: the sum, the largest, how many. */
export type Rss = { total: number; largest: number; processes: number };
export function treeRss(root: number): Rss {
  const rss: Rss = { total: 0, largest: 0, processes: 0 };
  for (const pid of treePids(root)) {
    try {
      const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      const bytes = Number(kb ?? 0) * 1024;
      rss.total += bytes;
      rss.largest = Math.max(rss.largest, bytes);
      rss.processes++;
    } catch {
      /* gone */
    }
  }
  return rss;
}

let clockTicks: number | undefined;
/** CPU time (user + system) the processes used so far, in ms; a process that is gone counts 0. */
export function cpuMsOf(pids: number[]): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  let ticks = 0;
  for (const pid of pids) {
    const stat = procStat(pid);
    if (stat) ticks += Number(stat[11]) + Number(stat[12]);
  }
  return (ticks * 1000) / clockTicks;
}
