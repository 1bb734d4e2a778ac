import { useState } from 'react';
import { Alert, Anchor, Badge, Button, Code, Group, Modal, Paper, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { RefundReason, type Refund, type RefundStatus, type RefundStatusOfOrder, type SessionView } from '@svc/contract';
import { refundTypedDataV4 } from '@svc/sdk/refunds';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { CodeTextarea, ErrorLine, Loaded, StackTable, useAction, when } from '../ui';

/**
 * Refunds on the order page (docs/dashboard.md "Refunds"): the merchant asks for a refund, the
 * service answers the EIP-3009 transfer to sign from the receiving wallet, the browser wallet
 * signs it (EIP-1193 `eth_signTypedData_v4`) or a signature made elsewhere is pasted, and the
 * page follows the refund until its transfer is known.
 */

const REASON_LABEL = {
  requested_by_customer: 'Requested by customer',
  duplicate: 'Duplicate',
  fraudulent: 'Fraudulent',
  other: 'Other',
} as const satisfies Record<RefundReason, string>;

const STATUS_COLOR = { requires_authorization: 'yellow', pending: 'blue', succeeded: 'teal', failed: 'red', canceled: 'gray' } as const satisfies Record<RefundStatus, string>;
/** The refunds that count against what is left to refund (a canceled or failed one gives its share back). */
const HOLDS_AMOUNT: ReadonlySet<RefundStatus> = new Set(['requires_authorization', 'pending', 'succeeded']);

export function RefundStatusBadge({ status }: { status: RefundStatus }) {
  return (
    <Badge color={STATUS_COLOR[status]} variant="light" data-testid="refund-status">
      {status.replaceAll('_', ' ')}
    </Badge>
  );
}

/** The orders list's mark for an order with refunds; nothing when none succeeded. */
export function OrderRefundBadge({ status, amount }: { status: RefundStatusOfOrder; amount: string }) {
  if (status === 'none') return null;
  return (
    <Badge variant="light" color={status === 'full' ? 'grape' : 'orange'} data-testid="refund-badge" title={`Refunded ${amount}`}>
      {status === 'full' ? 'refunded' : 'partially refunded'}
    </Badge>
  );
}

const places = (d: string) => (d.split('.')[1] ?? '').length;

function units(d: string, scale: number): bigint {
  const [i = '0', f = ''] = d.split('.');
  return BigInt(`${i}${f.padEnd(scale, '0').slice(0, scale)}`);
}

/** `total` minus `amounts`, exact (decimal strings, never floats), not below zero. */
export function remainingAmount(total: string, amounts: string[]): string {
  const scale = Math.max(2, ...[total, ...amounts].map(places));
  let left = units(total, scale) - amounts.reduce((sum, a) => sum + units(a, scale), 0n);
  if (left < 0n) left = 0n;
  const digits = left.toString().padStart(scale + 1, '0');
  const keep = Math.max(2, places(total));
  const frac = digits.slice(-scale).replace(/0+$/, '').padEnd(keep, '0');
  return `${digits.slice(0, -scale)}.${frac}`;
}

/** The block explorer page of a live refund's transfer. */
function refundTxUrl(r: Pick<Refund, 'transaction' | 'livemode' | 'chain'>): string | null {
  if (!r.livemode || !r.transaction || !/^0x[0-9a-fA-F]{64}$/.test(r.transaction)) return null;
  return `${r.chain === 'base-sepolia' ? 'https://sepolia.basescan.org' : 'https://basescan.org'}/tx/${r.transaction}`;
}

export function RefundTransaction({ refund }: { refund: Pick<Refund, 'transaction' | 'livemode' | 'chain'> }) {
  if (!refund.transaction) return <>—</>;
  const url = refundTxUrl(refund);
  return url ? (
    <Anchor href={url} target="_blank" rel="noreferrer" data-testid="refund-transaction" style={{ wordBreak: 'break-all' }}>
      {refund.transaction}
    </Anchor>
  ) : (
    <Code data-testid="refund-transaction" style={{ wordBreak: 'break-all' }}>
      {refund.transaction}
    </Code>
  );
}

type Eip1193 = { request(args: { method: string; params?: unknown[] }): Promise<unknown> };
const browserWallet = (): Eip1193 | undefined => (window as Window & { ethereum?: Eip1193 }).ethereum;

/** Signs the refund's typed data with the browser wallet's account that is the transfer's `from`. */
async function signInWallet(refund: Refund): Promise<string> {
  const wallet = browserWallet();
  if (!wallet) throw new Error('No browser wallet was found (window.ethereum). Paste a signature made elsewhere instead.');
  const from = refund.authorization_request!.typed_data.message.from;
  const accounts = (await wallet.request({ method: 'eth_requestAccounts' })) as string[];
  if (!accounts.some((a) => a.toLowerCase() === from.toLowerCase())) {
    throw new Error(`The wallet's account ${accounts.join(', ') || '(none)'} is not the receiving address ${from}, which must sign this refund. Switch accounts in the wallet, or paste a signature made by ${from}.`);
  }
  const signature = await wallet.request({ method: 'eth_signTypedData_v4', params: [from, refundTypedDataV4(refund)] });
  if (typeof signature !== 'string') throw new Error('The wallet did not return a signature.');
  return signature;
}

/** The order page's refunds: what is left to refund, the Refund action and each refund's progress. */
export function RefundsPanel({ session }: { session: SessionView }) {
  const ws = useWorkspace();
  const orderId = session.orderId!;
  const [dialog, setDialog] = useState<{ refundId: string | null } | null>(null);
  const refunds = useQuery({
    queryKey: ws.key('refunds', orderId),
    queryFn: () => ok(ws.api.refunds.list({ query: { order_id: orderId, limit: 100 } })),
    // a pending refund's transfer resolves on its own: follow it
    refetchInterval: (q) => (q.state.data?.data.some((r) => r.status === 'pending') ? 2_000 : false),
  });
  const refundable = session.state === 'accepted' && session.settlement?.rail === 'x402';
  const list = refunds.data?.data ?? [];
  const remaining = remainingAmount(session.total.total, list.filter((r) => HOLDS_AMOUNT.has(r.status)).map((r) => r.amount));
  const refunded = list.filter((r) => r.status === 'succeeded').map((r) => r.amount);
  return (
    <Stack gap="xs">
      <Group justify="space-between">
        <Title order={2} fz="h4">
          Refunds
        </Title>
        {refundable && (
          <Button variant="outline" color="orange" disabled={!refunds.data || units(remaining, places(remaining)) === 0n} onClick={() => setDialog({ refundId: null })}>
            Refund
          </Button>
        )}
      </Group>
      {!refundable && (
        <Text c="dimmed" size="sm">
          Only an accepted order paid over x402 through this service can be refunded.
        </Text>
      )}
      <Loaded q={refunds}>
        {(page) =>
          page.data.length === 0 ? (
            <Text c="dimmed">No refunds.</Text>
          ) : (
            <Stack gap="xs">
              <Text size="sm" data-testid="refund-summary">
                Refunded {refunded.reduce(addAmounts, '0.00')} of {session.total.total} {session.total.currency}; {remaining} left to refund.
              </Text>
              <StackTable cols={['Refund', 'Status', 'Amount', 'Reason', 'Transaction', 'Created', '']} aria-label="Refunds">
                  <Table.Tbody>
                    {page.data.map((r) => (
                      <Table.Tr key={r.id} data-testid="refund-row">
                        <Table.Td>
                          <Code>{r.id}</Code>
                        </Table.Td>
                        <Table.Td style={{ whiteSpace: 'nowrap' }}>
                          <RefundStatusBadge status={r.status} />
                        </Table.Td>
                        <Table.Td style={{ whiteSpace: 'nowrap' }}>
                          {r.amount} {r.currency}
                        </Table.Td>
                        <Table.Td>{r.reason ? REASON_LABEL[r.reason] : '—'}</Table.Td>
                        <Table.Td maw={260}>
                          <RefundTransaction refund={r} />
                        </Table.Td>
                        <Table.Td>{when(r.created_at)}</Table.Td>
                        <Table.Td>
                          {r.status === 'requires_authorization' && (
                            <Button size="xs" variant="default" onClick={() => setDialog({ refundId: r.id })}>
                              Authorize {r.id}
                            </Button>
                          )}
                        </Table.Td>
                      </Table.Tr>
                    ))}
                  </Table.Tbody>
                </StackTable>
            </Stack>
          )
        }
      </Loaded>
      {dialog && <RefundDialog session={session} remaining={remaining} resumeId={dialog.refundId} onClose={() => setDialog(null)} />}
    </Stack>
  );
}

/** `a + b`, exact. */
function addAmounts(a: string, b: string): string {
  const scale = Math.max(2, places(a), places(b));
  const digits = (units(a, scale) + units(b, scale)).toString().padStart(scale + 1, '0');
  return `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

/**
 * One refund from the merchant's side: amount and reason, a confirmation, then the typed data
 * to sign (browser wallet or pasted signature), then its progress until the transfer is known.
 * `resumeId` opens a refund that is still waiting for its signature.
 */
function RefundDialog({ session, remaining, resumeId, onClose }: { session: SessionView; remaining: string; resumeId: string | null; onClose: () => void }) {
  const ws = useWorkspace();
  const [step, setStep] = useState<'form' | 'confirm' | 'refund'>(resumeId ? 'refund' : 'form');
  const [amount, setAmount] = useState(remaining);
  const [reason, setReason] = useState<RefundReason>('requested_by_customer');
  const [refundId, setRefundId] = useState<string | null>(resumeId);
  const [pasted, setPasted] = useState('');
  const refund = useQuery({
    queryKey: ws.key('refund', refundId),
    enabled: Boolean(refundId),
    queryFn: () => ok(ws.api.refunds.get({ params: { id: refundId! } })),
    refetchInterval: (q) => (q.state.data?.status === 'pending' ? 1_000 : false),
  });
  const create = useAction(() => ok(ws.api.refunds.create({ body: { order_id: session.orderId!, amount: amount.trim(), reason } })), {
    onDone: (r) => {
      setRefundId(r.id);
      setStep('refund');
    },
  });
  const authorize = useAction((signature: string) => ok(ws.api.refunds.authorize({ params: { id: refundId! }, body: { signature: signature.trim() } })), {
    success: (r) => (r.status === 'succeeded' ? 'Refund sent.' : `Refund ${r.status.replaceAll('_', ' ')}.`),
  });
  const walletSign = useAction(async (r: Refund) => authorize.mutateAsync(await signInWallet(r)));
  const cancel = useAction(() => ok(ws.api.refunds.cancel({ params: { id: refundId! } })), { success: 'Refund canceled.' });
  const r = refund.data;
  return (
    <Modal opened onClose={onClose} title={step === 'refund' && r ? `Refund ${r.id}` : 'Refund this order'} size="lg">
      {step === 'form' && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setStep('confirm');
          }}
        >
          <Stack>
            <TextInput
              label="Amount"
              description={`In ${session.total.currency}; at most ${remaining} is left to refund.`}
              value={amount}
              onChange={(e) => setAmount(e.currentTarget.value)}
              rightSection={<Text size="xs">{session.total.currency}</Text>}
              rightSectionWidth={48}
            />
            <Select
              label="Reason"
              allowDeselect={false}
              value={reason}
              onChange={(v) => v && setReason(v as RefundReason)}
              data={RefundReason.options.map((value) => ({ value, label: REASON_LABEL[value] }))}
            />
            <Button type="submit" disabled={!/^\d+(\.\d+)?$/.test(amount.trim())}>
              Continue
            </Button>
          </Stack>
        </form>
      )}
      {step === 'confirm' && (
        <Stack>
          <ErrorLine error={create.error} />
          <Text size="sm">
            Refund {amount.trim()} {session.total.currency} of order {session.orderId} ({REASON_LABEL[reason]}) to the address that paid it. The money comes from your receiving wallet: next you sign the transfer with it.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setStep('form')}>
              Back
            </Button>
            <Button color="orange" loading={create.isPending} onClick={() => create.mutate(undefined)}>
              Confirm refund
            </Button>
          </Group>
        </Stack>
      )}
      {step === 'refund' && (
        <Loaded q={refund}>
          {(current) => (
            <Stack>
              <Group>
                <Text fw={600}>
                  {current.amount} {current.currency}
                </Text>
                <RefundStatusBadge status={current.status} />
              </Group>
              <ErrorLine error={authorize.error ?? walletSign.error ?? cancel.error} />
              {current.status === 'requires_authorization' && current.authorization_request && (
                <>
                  <Text size="sm">
                    Sign this transfer with the receiving address <Code>{current.authorization_request.typed_data.message.from}</Code>. It sends{' '}
                    {current.amount} {current.currency} to <Code>{current.authorization_request.typed_data.message.to}</Code> and is valid until{' '}
                    {when(current.authorization_request.typed_data.message.validBefore)}.
                  </Text>
                  <Paper withBorder p="xs">
                    <Text size="xs" fw={600}>
                      Typed data to sign (EIP-712)
                    </Text>
                    <Code block data-testid="refund-typed-data" style={{ maxHeight: 260, overflow: 'auto' }}>
                      {JSON.stringify(JSON.parse(refundTypedDataV4(current)), null, 2)}
                    </Code>
                  </Paper>
                  <Group>
                    <Button color="orange" loading={walletSign.isPending} disabled={!browserWallet()} onClick={() => walletSign.mutate(current)}>
                      Sign with browser wallet
                    </Button>
                    {!browserWallet() && (
                      <Text size="xs" c="dimmed">
                        No browser wallet found: paste a signature.
                      </Text>
                    )}
                  </Group>
                  <CodeTextarea
                    label="Signature"
                    description="Or paste the signature made elsewhere (0x…, 65 bytes)."
                    value={pasted}
                    onChange={(e) => setPasted(e.currentTarget.value)}
                  />
                  <Group justify="space-between">
                    <Button variant="subtle" color="red" loading={cancel.isPending} onClick={() => cancel.mutate(undefined)}>
                      Cancel refund
                    </Button>
                    <Button loading={authorize.isPending && !walletSign.isPending} disabled={!/^0x[0-9a-fA-F]{130}$/.test(pasted.trim())} onClick={() => authorize.mutate(pasted)}>
                      Authorize refund
                    </Button>
                  </Group>
                </>
              )}
              {current.status === 'pending' && (
                <Alert color="blue" role="status">
                  The transfer is on its way to the chain. This page follows it.
                </Alert>
              )}
              {current.status === 'succeeded' && (
                <Alert color="teal" role="status" title="Refund sent">
                  <Stack gap={4}>
                    <Text size="sm">
                      Transaction: <RefundTransaction refund={current} />
                    </Text>
                    {!current.livemode && <Text size="xs">Test mode: the mock facilitator checked the transfer; nothing moved on chain.</Text>}
                  </Stack>
                </Alert>
              )}
              {(current.status === 'failed' || current.status === 'canceled') && (
                <Alert color={current.status === 'failed' ? 'red' : 'gray'} role="status" title={`Refund ${current.status}`}>
                  {current.failure ? `${current.failure.error_human} (${current.failure.reason_codes.join(', ')})` : 'No money moved.'}
                </Alert>
              )}
              <Group justify="flex-end">
                <Button variant="default" onClick={onClose}>
                  Close
                </Button>
              </Group>
            </Stack>
          )}
        </Loaded>
      )}
    </Modal>
  );
}
