import { recoverAddress, type Address, type Hex } from 'viem';

/**
 * The signer recovery pool's task (lib/signer-recovery.ts), run in a worker thread: viem's own
 * recovery, so the pool answers exactly what the request thread would. Imports nothing else,
 * so a thread starts in tens of milliseconds.
 */
export default function recover(task: { digest: Hex; signature: Hex }): Promise<Address> {
  return recoverAddress({ hash: task.digest, signature: task.signature });
}
