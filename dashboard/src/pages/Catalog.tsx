import { useState } from 'react';
import { Badge, Button, Checkbox, Group, Modal, Stack, Switch, Table, Text, Textarea, TextInput } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import type { CatalogItem, CatalogItemInput } from '@svc/contract';
import { SvcConflictError } from '@svc/sdk/errors';
import { fieldMessage, ok, unplaced } from '../api';
import { useWorkspace } from '../session';
import { CodeTextarea, Confirm, ErrorLine, Loaded, Page, useAction, StackTable } from '../ui';


/** Edits an item (`initial`, as listed) into the body that creates it. */
function ItemForm({ initial, onSubmit, busy, error, submitLabel }: { initial?: CatalogItem; onSubmit: (v: CatalogItemInput) => void; busy: boolean; error: unknown; submitLabel: string }) {
  const [sku, setSku] = useState(initial?.sku ?? '');
  const [name, setName] = useState(initial?.name ?? '');
  const [amount, setAmount] = useState(initial?.price.amount ?? '');
  const [currency, setCurrency] = useState(initial?.price.currency ?? 'USD');
  const [category, setCategory] = useState(initial?.category ?? '');
  const [available, setAvailable] = useState(initial?.available ?? true);
  const [description, setDescription] = useState(initial?.description ?? '');
  const [unit, setUnit] = useState(initial?.unit ?? '');
  const [metadata, setMetadata] = useState(initial?.metadata && Object.keys(initial.metadata).length ? JSON.stringify(initial.metadata, null, 2) : '');
  const [metadataError, setMetadataError] = useState<string | null>(null);
  const fields = ['sku', 'name', 'price.amount', 'price.currency', 'price', 'category', 'description', 'unit', 'metadata'];
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        let meta: Record<string, unknown> | undefined;
        if (metadata.trim()) {
          try {
            const parsed: unknown = JSON.parse(metadata);
            if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
            meta = parsed as Record<string, unknown>;
          } catch {
            setMetadataError('Metadata must be a JSON object, e.g. {"origin": "Ethiopia"}.');
            return;
          }
        }
        setMetadataError(null);
        onSubmit({
          sku,
          name,
          price: { amount: amount.trim(), currency: currency.trim() },
          available,
          ...(category.trim() ? { category: category.trim() } : {}),
          ...(description.trim() ? { description: description.trim() } : {}),
          ...(unit.trim() ? { unit: unit.trim() } : {}),
          ...(meta ? { metadata: meta } : {}),
        });
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
        <Textarea label="Description" description="What agents read about the product" autosize minRows={2} maxLength={5000} value={description} onChange={(e) => setDescription(e.currentTarget.value)} error={fieldMessage(error, 'description')} />
        <TextInput label="Unit" description="What one quantity is, e.g. cup, kg, month" maxLength={50} value={unit} onChange={(e) => setUnit(e.currentTarget.value)} error={fieldMessage(error, 'unit')} />
        <CodeTextarea
          label="Metadata"
          description="Your own keys and values, as a JSON object"
          placeholder='{"origin": "Ethiopia"}'
          value={metadata}
          onChange={(e) => setMetadata(e.currentTarget.value)}
          error={metadataError ?? fieldMessage(error, 'metadata')}
        />
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
  const update = useAction((v: CatalogItemInput) => ok(ws.api.catalog.update({ params: { sku: v.sku }, query: ws.mq, body: { name: v.name, price: v.price, available: v.available, category: v.category ?? null, description: v.description ?? null, unit: v.unit ?? null, metadata: v.metadata ?? {} } })), {
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
          <>
          <StackTable cols={['SKU', 'Name', 'Price', 'Status', 'Actions']} aria-label="Products" striped>
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
            </StackTable>
            {list.items.length === 0 && <Text c="dimmed">No products yet.</Text>}
          </>
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
