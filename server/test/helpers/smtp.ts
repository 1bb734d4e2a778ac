import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export type Smtp = Awaited<ReturnType<typeof startSmtp>>;

/** A real SMTP server on loopback that keeps every message it receives (raw, as sent). */
export async function startSmtp() {
  const messages: string[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      let raw = '';
      stream.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
      stream.on('end', () => {
        messages.push(raw);
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return { url: `smtp://127.0.0.1:${port}`, messages, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** The text of a raw message as its reader sees it: headers kept, a quoted-printable body decoded. */
export function mailText(raw: string): string {
  const split = raw.search(/\r?\n\r?\n/);
  const headers = raw.slice(0, split);
  const body = raw.slice(split);
  if (!/^content-transfer-encoding:\s*quoted-printable/im.test(headers)) return raw;
  const decoded = Buffer.from(
    body.replace(/=\r?\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
    'latin1',
  ).toString('utf8');
  return headers + decoded;
}

/** The messages sent to `to`, decoded. */
export function mailsTo(smtp: Smtp, to: string): string[] {
  return smtp.messages.map(mailText).filter((m) => new RegExp(`^To: ${to.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\r?$`, 'im').test(m));
}

/** The sign-in link of a decoded mail. */
export function signInLinkOf(mail: string): string {
  const m = /(https?:\/\/\S+\/v1\/auth\/verify\?token=[A-Za-z0-9_-]+)/.exec(mail);
  if (!m) throw new Error(`no sign-in link in the mail:\n${mail}`);
  return m[1]!;
}
