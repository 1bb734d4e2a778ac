import { useId, type ComponentProps, type ReactNode } from 'react';
import { Alert, Anchor, Button, Center, Group, Loader, Modal, Stack, Table, Text, Textarea, Title, type TextareaProps } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient, type UseQueryResult } from '@tanstack/react-query';
import { Link } from 'react-router';
import { CHAINS, type Total } from '@svc/contract';
import { errorText } from './api';

export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <Stack gap="md" maw={1200}>
      <Group justify="space-between" wrap="wrap">
        <Title order={1} fz="h2" style={{ overflowWrap: 'anywhere' }}>
          {title}
        </Title>
        {actions}
      </Group>
      {children}
    </Stack>
  );
}

/** Loading, error or the data: every page shows a query the same way. */
export function Loaded<T>({ q, children }: { q: UseQueryResult<T>; children: (data: T) => ReactNode }) {
  if (q.isLoading)
    return (
      <Center p="xl">
        <Loader aria-label="Loading" />
      </Center>
    );
  if (q.isError)
    return (
      <Alert color="red" title="Could not load" role="alert">
        {errorText(q.error)}
      </Alert>
    );
  return <>{q.data !== undefined ? children(q.data) : null}</>;
}

export function ErrorLine({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <Alert color="red" role="alert" title="The server refused this">
      {errorText(error)}
    </Alert>
  );
}

/** A write that refreshes the mode's cached reads and tells the user what happened. */
export function useAction<A, R>(fn: (a: A) => Promise<R>, opts: { success?: string | ((r: R) => string); onDone?: (r: R) => void } = {}) {
  const queries = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: async (r) => {
      await queries.invalidateQueries();
      if (opts.success) notifications.show({ color: 'green', message: typeof opts.success === 'string' ? opts.success : opts.success(r) });
      opts.onDone?.(r);
    },
  });
}

export function Confirm({
  opened,
  title,
  children,
  confirmLabel,
  color,
  busy,
  onConfirm,
  onClose,
}: {
  opened: boolean;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  color?: string;
  busy?: boolean;
  onConfirm: () => void;
  onClose: () => void;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={title} centered>
      <Stack>
        <Text size="sm">{children}</Text>
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Cancel
          </Button>
          <Button color={color ?? 'blue'} loading={busy ?? false} onClick={onConfirm}>
            {confirmLabel}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

/** An order or session total (the contract's Total). */
export const money = (t: Pick<Total, 'total' | 'currency'> | null | undefined) => (t ? `${t.total} ${t.currency}` : '—');
export const when = (iso: string | number | null | undefined) => {
  if (iso === null || iso === undefined) return '—';
  const d = typeof iso === 'number' ? new Date(iso * 1000) : new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
};

export function RouterAnchor({ to, children }: { to: string; children: ReactNode }) {
  return (
    <Anchor component={Link} to={to}>
      {children}
    </Anchor>
  );
}

/** The chain a live x402 payment settles on: its explorer (the chain registry's) links transactions and addresses. */
const LIVE_EXPLORER = CHAINS.base.explorer;

/** The block explorer page of a transaction, for live settlements on Base. */
export function explorerTx(ref: string, livemode: boolean): string | null {
  return livemode && /^0x[0-9a-fA-F]{64}$/.test(ref) ? `${LIVE_EXPLORER}/tx/${ref}` : null;
}

/** The block explorer page of a wallet address, in live mode (test mode settles through the mock: nothing on chain). */
export function explorerAddress(address: string, livemode: boolean): string | null {
  return livemode && /^0x[0-9a-fA-F]{40}$/.test(address) ? `${LIVE_EXPLORER}/address/${address}` : null;
}

/** A table's header row from its column titles. */
export function TableHead({ cols }: { cols: string[] }) {
  return (
    <Table.Thead>
      <Table.Tr>
        {cols.map((c) => (
          <Table.Th key={c}>{c}</Table.Th>
        ))}
      </Table.Tr>
    </Table.Thead>
  );
}

/** A growing text area for code a person pastes or types (a signature, JSON), in the monospace font. */
export function CodeTextarea(props: TextareaProps) {
  return <Textarea autosize minRows={2} styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }} {...props} />;
}

/** Below this width a StackTable shows each row as a card of "column: value" lines. */
export const STACK_BELOW = '48em';

/**
 * A table that fits a phone: from 48em up a plain table; narrower, every row is a card whose
 * cells stack, each led by its column's title (scoped CSS generated from `cols`, so the DOM,
 * the roles and the test ids stay those of the table). Nothing scrolls sideways.
 */
export function StackTable({ cols, children, ...props }: { cols: string[]; children: ReactNode } & Omit<ComponentProps<typeof Table>, 'children'>) {
  const id = useId();
  const sel = `table[data-stack="${id}"]`;
  const labels = cols.map((c, i) => (c ? `${sel} > tbody > tr > td:nth-child(${i + 1})::before{content:${JSON.stringify(c)}}` : '')).join('');
  const css =
    `@media (max-width:${STACK_BELOW}){${sel},${sel} > tbody,${sel} > tfoot{display:block;width:100%}` +
    `${sel} > thead{display:none}` +
    `${sel} > tbody > tr,${sel} > tfoot > tr{display:block;padding:var(--mantine-spacing-xs) 0;border-bottom:1px solid var(--mantine-color-default-border)}` +
    `${sel} > tbody > tr > td,${sel} > tfoot > tr > th{display:flex;gap:var(--mantine-spacing-sm);justify-content:space-between;align-items:baseline;border:0;padding:2px var(--mantine-spacing-xs);overflow-wrap:anywhere;text-align:right}` +
    `${sel} > tbody > tr > td::before{font-weight:600;text-align:left;flex:none;max-width:45%}${labels}}`;
  return (
    <>
      <style>{css}</style>
      <Table data-stack={id} {...props}>
        <TableHead cols={cols} />
        {children}
      </Table>
    </>
  );
}

/** A dialog with one form: the server's refusal above the fields, one submit button running `action`. */
export function ModalForm({
  opened,
  onClose,
  title,
  action,
  submitLabel,
  children,
}: {
  opened: boolean;
  onClose: () => void;
  title: string;
  action: { mutate: (v: undefined) => void; isPending: boolean; error: unknown };
  submitLabel: string;
  children: ReactNode;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={title}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          action.mutate(undefined);
        }}
      >
        <Stack>
          <ErrorLine error={action.error} />
          {children}
          <Button type="submit" loading={action.isPending}>
            {submitLabel}
          </Button>
        </Stack>
      </form>
    </Modal>
  );
}
