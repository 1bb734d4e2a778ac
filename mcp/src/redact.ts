/**
 * Removes the wallet key from any text before it leaves the process (tool results, stderr):
 * the 64 hex digits of the key, in any case, with or without 0x. A tool never puts the key in
 * a result; this is the second line, for messages that echo their input (a URL, a receipt).
 */
export function makeRedactor(privateKey: string): (text: string) => string {
  const body = privateKey.replace(/^0x/i, '');
  const pattern = new RegExp(body.replace(/[^0-9a-fA-F]/g, ''), 'gi');
  return (text) => text.replace(pattern, '[REDACTED]');
}
