import { Checkbox, Fieldset, Group, MultiSelect, NumberInput, Select, SimpleGrid, Stack, Switch, TagsInput, Text } from '@mantine/core';
import { POLICY_DEFAULTS, RailName, ReputationTier, TrustTier, type MerchantPolicy } from '@svc/contract';

type Body = Record<string, unknown>;
type NumberField = 'requireMandateOverUsd' | 'maxPerTransactionUsd' | 'maxPerAgentPerDayUsd' | 'ratePerAgentPerHour' | 'ratePerAgentPerDay';

const NUMBER_FIELDS: { key: NumberField; label: string; usd: boolean }[] = [
  { key: 'requireMandateOverUsd', label: 'Require a mandate over (USD)', usd: true },
  { key: 'maxPerTransactionUsd', label: 'Most per purchase (USD)', usd: true },
  { key: 'maxPerAgentPerDayUsd', label: 'Most per agent per day (USD)', usd: true },
  { key: 'ratePerAgentPerHour', label: 'Purchases per agent per hour', usd: false },
  { key: 'ratePerAgentPerDay', label: 'Purchases per agent per day', usd: false },
];

const describeDefault = (v: unknown) => (v === null ? 'no limit' : Array.isArray(v) ? (v.length ? v.join(', ') : 'none') : String(v));

/**
 * The known MerchantPolicy fields as a form, beside the raw JSON (Policy.tsx): both edit the
 * same draft. A field left alone stays absent and takes its default; "No limit" writes null
 * (decisions.md, "Policy"). Unknown fields in the JSON are kept as they are.
 */
export function PolicyForm({ body, onChange, disabled }: { body: Body | null; onChange: (next: Body) => void; disabled: boolean }) {
  const b = body ?? {};
  const set = (key: keyof MerchantPolicy, value: unknown) => {
    const next = { ...b };
    if (value === undefined) delete next[key];
    else next[key] = value;
    onChange(next);
  };
  const has = (key: keyof MerchantPolicy) => Object.prototype.hasOwnProperty.call(b, key);
  const hint = (key: keyof MerchantPolicy) => (has(key) ? undefined : `Default: ${describeDefault(POLICY_DEFAULTS[key])}`);
  const tierSelect = (key: 'minReputationTier' | 'holdForReviewBelowTier', label: string, tiers: readonly string[], none: string) => (
    <Select
      label={label}
      description={hint(key)}
      placeholder={`Default: ${describeDefault(POLICY_DEFAULTS[key])}`}
      clearable
      value={has(key) ? ((b[key] as string | null) ?? 'none') : null}
      data={[...tiers.map((t) => ({ value: t, label: t })), { value: 'none', label: none }]}
      onChange={(v) => set(key, v === null ? undefined : v === 'none' ? null : v)}
    />
  );

  return (
    <Fieldset variant="unstyled" disabled={disabled} aria-label="Policy form">
      <Stack gap="sm">
      {disabled && <Text size="sm" c="red">Fix the JSON to use the form.</Text>}
      <SimpleGrid cols={{ base: 1, xs: 2 }} spacing="sm">
        {NUMBER_FIELDS.map(({ key, label, usd }) => {
          const value = b[key];
          const noLimit = has(key) && value === null;
          return (
            <Stack key={key} gap={4}>
              <NumberInput
                label={label}
                description={hint(key)}
                placeholder={noLimit ? 'No limit' : `Default: ${describeDefault(POLICY_DEFAULTS[key])}`}
                min={0}
                decimalScale={usd ? 2 : 0}
                allowNegative={false}
                disabled={noLimit}
                value={typeof value === 'number' ? value : ''}
                onChange={(v) => set(key, typeof v === 'number' ? v : v === '' ? undefined : Number(v))}
              />
              <Checkbox size="xs" label="No limit" checked={noLimit} onChange={(e) => set(key, e.currentTarget.checked ? null : undefined)} />
            </Stack>
          );
        })}
        {tierSelect('minReputationTier', 'Lowest reputation accepted', ReputationTier.options, 'Any reputation')}
        {tierSelect('holdForReviewBelowTier', 'Hold for review below trust tier', TrustTier.options, 'Never hold')}
      </SimpleGrid>
      <MultiSelect
        label="Allowed rails"
        description={has('allowedRails') ? undefined : 'Default: every rail of the merchant'}
        data={[...RailName.options]}
        value={Array.isArray(b.allowedRails) ? (b.allowedRails as string[]) : []}
        onChange={(v) => set('allowedRails', v.length ? v : undefined)}
      />
      <TagsInput label="Blocked agents" description="Agent ids; press Enter after each." value={Array.isArray(b.blockedAgents) ? (b.blockedAgents as string[]) : []} onChange={(v) => set('blockedAgents', v.length ? v : undefined)} />
      <TagsInput
        label="Forbidden intent keywords"
        description="A purchase whose stated intent contains one is rejected."
        value={Array.isArray(b.forbiddenIntentKeywords) ? (b.forbiddenIntentKeywords as string[]) : []}
        onChange={(v) => set('forbiddenIntentKeywords', v.length ? v : undefined)}
      />
      <Group>
        <Switch
          label="The buyer's intent must match the mandate's"
          checked={b.requiredIntentMatch === true}
          onChange={(e) => set('requiredIntentMatch', e.currentTarget.checked ? true : undefined)}
        />
      </Group>
      </Stack>
    </Fieldset>
  );
}
