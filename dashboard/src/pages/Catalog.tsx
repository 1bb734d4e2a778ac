import { useState } from 'react';
import { Badge, Button, Checkbox, Group, Modal, Stack, Switch, Table, Text, TextInput } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import type { CatalogItem, CatalogItemInput } from '@svc/contract';
import { SvcConflictError } from '@svc/sdk/errors';
import { fieldMessage, ok } from '../api';
import { useWorkspace } from '../session';
import { Confirm, ErrorLine, Loaded, Page, useAction, TableHead } from '../ui';

/** The server's message for a field is shown next to it; other errors go above the form. */
const unplaced = (err: unknown, fields: string[]) => (err && !fields.some((f) => fieldMessage(err, f)) ? err : null);

/** Edits an item (`initial`, as listed) into the body that creates it. */
function ItemForm({ initial, onSubmit, busy, error, submitLabel }: { initial?: CatalogItem; onSubmit: (v: CatalogItemInput) => void; busy: boolean; error: unknown; submitLabel: string }) {
  const [sku, setSku] = useState(initial?.sku ?? '');
  const [name, setName] = useState(initial?.name ?? '');
  const [amount, setAmount] = useState(initial?.price.amount ?? '');
  const [currency, setCurrency] = useState(initial?.price.currency ?? 'USD');
  const [category, setCategory] = useState(initial?.category ?? '');
  const [available, setAvailable] = useState(initial?.available ?? true);
  const fields = ['sku', 'name', 'price.amount', 'price.currency', 'price', 'category'];
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        onSubmit({ sku, name, price: { amount: amount.trim(), currency: currency.trim() }, available, ...(category.trim() ? { category: category.trim() } : {}) });
      }}
    >
      <Stack>
        <ErrorLine error={unplaced(error, fields)} />
        <TextInput label="SKU" required disabled={Boolean(initial)} value={sku} onChange={(e) => setSku(e.currentTarget.value)} error={fieldMessage(error, 'sku') ?? (error instanceof SvcConflictError ? error.errorHuman : undefined)} />
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldMessage(error, 'name')} />
        <Group grow align="flex-start">
          <TextInput label="Price" description="Exact decimal, e.g. 12.50" required inputMode="decimal" value={amount} onChange={(e) => setAmount(e.currentTarget.value)} error={fieldMessage(error, 'price.amount')} />
          <TextInput label="Currency" required maxLength={3} value={currency} onChange={(e) => setCurrency(e.currentTarget.value)} error={fieldMessage(error, 'price.currency')} />
        </Group>
        <TextInput label="Category" value={category} onChange={(e) => setCategory(e.currentTarget.value)} error={fieldMessage(error, 'category')} />
        <Checkbox label="Available to agents" checked={available} onChange={(e) => setAvailable(e.currentTarget.checked)} />
        <Button type="submit" loading={busy}>
          {submitLabel}
        </Button>
      </Stack>
    </form>
  );
}

export function CatalogPage() {
  const ws = useWorkspace();
  const [showRetired, setShowRetired] = useState(false);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<CatalogItem | null>(null);
  const [retiring, setRetiring] = useState<CatalogItem | null>(null);
  const items = useQuery({
    queryKey: ws.key('catalog', showRetired),
    enabled: Boolean(ws.merchant),
    queryFn: () => ok(ws.api.catalog.list({ query: { ...ws.mq, ...(showRetired ? {} : { available: 'true' as const }) } })),
  });
  const create = useAction((v: CatalogItemInput) => ok(ws.api.catalog.create({ query: ws.mq, body: v })), { success: 'Product created.', onDone: () => setCreating(false) });
  const update = useAction((v: CatalogItemInput) => ok(ws.api.catalog.update({ params: { sku: v.sku }, query: ws.mq, body: { name: v.name, price: v.price, available: v.available, category: v.category ?? null } })), {
    success: 'Product saved.',
    onDone: () => setEditing(null),
  });
  const retire = useAction((sku: string) => ok(ws.api.catalog.remove({ params: { sku }, query: ws.mq })), { success: 'Product retired.', onDone: () => setRetiring(null) });

  if (!ws.merchant && !ws.merchantsLoading) return <Page title="Catalog"><Text>Create a merchant first.</Text></Page>;
  return (
    <Page
      title="Catalog"
      actions={
        <Group>
          <Switch label="Show retired" checked={showRetired} onChange={(e) => setShowRetired(e.currentTarget.checked)} />
          <Button onClick={() => { create.reset(); setCreating(true); }}>Add product</Button>
        </Group>
      }
    >
      <Loaded q={items}>
        {(list) => (
          <Table.ScrollContainer minWidth={600}>
            <Table aria-label="Products" striped>
              <TableHead cols={['SKU', 'Name', 'Price', 'Status', 'Actions']} />
              <Table.Tbody>
                {list.items.map((i) => (
                  <Table.Tr key={i.sku} data-testid="product-row">
                    <Table.Td>{i.sku}</Table.Td>
                    <Table.Td>{i.name}</Table.Td>
                    <Table.Td>
                      {i.price.amount} {i.price.currency}
                    </Table.Td>
                    <Table.Td>{i.available ? <Badge color="teal">available</Badge> : <Badge color="gray">retired</Badge>}</Table.Td>
                    <Table.Td>
                      <Group gap="xs">
                        <Button size="xs" variant="default" onClick={() => { update.reset(); setEditing(i); }} aria-label={`Edit ${i.sku}`}>
                          Edit
                        </Button>
                        {i.available && (
                          <Button size="xs" color="red" variant="subtle" onClick={() => setRetiring(i)} aria-label={`Retire ${i.sku}`}>
                            Retire
                          </Button>
                        )}
                      </Group>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
            {list.items.length === 0 && <Text c="dimmed">No products yet.</Text>}
          </Table.ScrollContainer>
        )}
      </Loaded>
      <Modal opened={creating} onClose={() => setCreating(false)} title="Add product">
        <ItemForm onSubmit={(v) => create.mutate(v)} busy={create.isPending} error={create.error} submitLabel="Create product" />
      </Modal>
      <Modal opened={editing !== null} onClose={() => setEditing(null)} title={`Edit ${editing?.sku ?? ''}`}>
        {editing && <ItemForm initial={editing} onSubmit={(v) => update.mutate(v)} busy={update.isPending} error={update.error} submitLabel="Save" />}
      </Modal>
      <Confirm opened={retiring !== null} title="Retire this product?" confirmLabel="Retire" color="red" busy={retire.isPending} onClose={() => setRetiring(null)} onConfirm={() => retiring && retire.mutate(retiring.sku)}>
        Agents can no longer buy {retiring?.name}. Past orders and receipts keep their reference.
      </Confirm>
    </Page>
  );
}
