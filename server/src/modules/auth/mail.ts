import nodemailer, { type Transporter } from 'nodemailer';
import type { Config } from '../../config.js';
import type { Logger } from '../../lib/logger.js';

/** `forDevice`: a command line asked for the link; the mail says where its code is typed and never names one. */
export type SignInMail = { to: string; link: string; expiresInMinutes: number; forDevice?: boolean };

/**
 * Sign-in mail. With SVC_SMTP_URL it goes out over SMTP (nodemailer; the link is never
 * logged). Without it, outside production the link is logged at info so a developer can
 * sign in without mail; in production it is not logged (a warning says mail is off).
 */
export class Mailer {
  private readonly transport: Transporter | null;

  constructor(
    private readonly config: Pick<Config, 'SVC_SMTP_URL' | 'SVC_MAIL_FROM' | 'NODE_ENV'>,
    private readonly log: Logger,
  ) {
    this.transport = config.SVC_SMTP_URL ? nodemailer.createTransport(config.SVC_SMTP_URL) : null;
  }

  get configured(): boolean {
    return this.transport !== null;
  }

  /** Never throws: a mail failure is logged (without the link) and the caller answers as usual. */
  async sendSignIn(mail: SignInMail): Promise<void> {
    const device = mail.forDevice
      ? '\nA command-line sign-in asked for it: after signing in, type the code that your own terminal shows. Never type a code someone sent you.\n'
      : '';
    const text = `Sign in to svc-checkout:\n\n${mail.link}\n\nThe link works once, for ${mail.expiresInMinutes} minutes.${device}\nIf you did not ask for it, ignore this mail.\n`;
    if (!this.transport) {
      if (this.config.NODE_ENV === 'production') this.log.warn('sign-in mail is not configured (SVC_SMTP_URL unset): no link was sent');
      else this.log.info({ verify_url: mail.link }, 'sign-in link (SVC_SMTP_URL unset, so it is logged instead of mailed)');
      return;
    }
    try {
      await this.transport.sendMail({ from: this.config.SVC_MAIL_FROM, to: mail.to, subject: 'Your svc-checkout sign-in link', text });
    } catch (err) {
      this.log.error({ err: err instanceof Error ? err.message : String(err) }, 'sign-in mail could not be sent');
    }
  }

  close(): void {
    this.transport?.close();
  }
}
