import { useEffect, useMemo, useState } from 'react';
import { Alert, Badge, Button, Code, Group, List, Paper, Select, SimpleGrid, Stack, Table, Text, Textarea, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { diffLines } from 'diff';
import { MerchantPolicy, newAgentPolicyWarnings, POLICY_PRESETS, type Finding } from '@svc/contract';
import { SvcValidationError } from '@svc/sdk/errors';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { PolicyForm } from './PolicyForm';
import { ErrorLine, Loaded, Page, useAction, when, StackTable } from '../ui';

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

function FindingList({ findings }: { findings: Finding[] }) {
  return (
    <List size="sm">
      {findings.map((f, i) => (
        <List.Item key={i}>
          <Code>{f.code}</Code> {f.human}
        </List.Item>
      ))}
    </List>
  );
}

function Diff({ from, to }: { from: unknown; to: unknown }) {
  const parts = useMemo(() => diffLines(pretty(from), pretty(to)), [from, to]);
  return (
    <Paper withBorder p="xs" component="pre" aria-label="Differences" style={{ overflowX: 'auto', fontSize: 13, margin: 0 }}>
      {parts.map((p, i) => (
        <span key={i} style={{ background: p.added ? '#d3f9d8' : p.removed ? '#ffe3e3' : undefined, display: 'block' }}>
          {p.value
            .replace(/\n$/, '')
            .split('\n')
            .map((line) => `${p.added ? '+ ' : p.removed ? '- ' : '  '}${line}`)
            .join('\n')}
        </span>
      ))}
    </Paper>
  );
}

export function PolicyPage() {
  const ws = useWorkspace();
  const versions = useQuery({ queryKey: ws.key('policy-versions'), enabled: Boolean(ws.merchant), queryFn: () => ok(ws.api.policy.versions({ query: { ...ws.mq, limit: 100 } })) });
  const [draft, setDraft] = useState('');
  const [note, setNote] = useState('');
  const [left, setLeft] = useState<string | null>(null);
  const [right, setRight] = useState<string | null>(null);
  const list = versions.data?.data ?? [];
  useEffect(() => {
    if (draft === '' && versions.data) setDraft(pretty(list[0]?.body ?? POLICY_PRESETS.BALANCED));
    if (list.length >= 2 && left === null && right === null) {
      setRight(String(list[0]!.version));
      setLeft(String(list[1]!.version));
    }
  }, [versions.data]); // eslint-disable-line react-hooks/exhaustive-deps

  let parsed: unknown = null;
  let parseError: string | null = null;
  try {
    parsed = JSON.parse(draft || '{}');
  } catch (err) {
    parseError = `Not valid JSON: ${(err as Error).message}`;
  }
  const isObject = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed);
  // what the draft would do to a new agent, said while editing (validate says it again, from the server)
  const known = isObject ? MerchantPolicy.safeParse(parsed) : null;
  const draftWarnings = known?.success ? newAgentPolicyWarnings(known.data) : [];
  const validate = useAction(() => ok(ws.api.policy.validate({ query: ws.mq })));
  const put = useAction(() => ok(ws.api.policy.put({ query: ws.mq, body: { body: parsed as Record<string, unknown>, ...(note.trim() ? { note: note.trim() } : {}) } })), {
    success: (r) => `Saved as version ${r.version} (not active until published).`,
    // the saved version is validated at once, so its findings (warnings too) show before anyone publishes
    onDone: () => {
      setNote('');
      validate.mutate(undefined);
    },
  });
  const publish = useAction(() => ok(ws.api.policy.publish({ query: ws.mq })), { success: (r) => `Published: version ${r.active_policy_version} is active.` });
  // Publish refused the draft (422): its findings, typed by the SDK's error.
  const publishFindings = publish.error instanceof SvcValidationError && publish.error.status === 422 ? publish.error.findings : null;
  const validated = validate.data?.findings;
  const errors = validated ? validated.filter((f) => f.severity === 'error') : publishFindings;
  const warnings = validated?.filter((f) => f.severity === 'warning') ?? [];
  const byVersion = (v: string | null) => list.find((x) => String(x.version) === v);

  if (!ws.merchant && !ws.merchantsLoading) return <Page title="Policy"><Text>Create a merchant first.</Text></Page>;
  return (
    <Page title="Policy">
      <Text size="sm" c="dimmed">
        The rules the acceptance gate applies to every payment. Versions are immutable: save a draft, validate, then publish to make the newest version active.
      </Text>
      <Paper withBorder p="md">
        <Stack>
          <Group>
            <Title order={2} fz="h4">
              Draft
            </Title>
            <Select
              aria-label="Start from a preset"
              placeholder="Start from a preset"
              w={220}
              data={Object.keys(POLICY_PRESETS)}
              value={null}
              onChange={(k) => k && setDraft(pretty(POLICY_PRESETS[k as keyof typeof POLICY_PRESETS]))}
            />
          </Group>
          <SimpleGrid cols={{ base: 1, md: 2 }} spacing="lg">
            <PolicyForm body={isObject ? (parsed as Record<string, unknown>) : null} disabled={!isObject} onChange={(next) => setDraft(pretty(next))} />
            <Textarea label="Policy (JSON)" autosize minRows={8} styles={{ input: { fontFamily: 'monospace' } }} value={draft} onChange={(e) => setDraft(e.currentTarget.value)} error={parseError} />
          </SimpleGrid>
          {draftWarnings.length > 0 && (
            <Alert color="yellow" title="This draft turns away new agents" data-testid="draft-warnings">
              <FindingList findings={draftWarnings} />
            </Alert>
          )}
          <TextInput label="Note" placeholder="What changed" value={note} onChange={(e) => setNote(e.currentTarget.value)} />
          <ErrorLine error={put.error ?? validate.error ?? (publishFindings ? null : publish.error)} />
          <Group>
            <Button onClick={() => put.mutate(undefined)} loading={put.isPending} disabled={parseError !== null}>
              Save version
            </Button>
            <Button variant="default" onClick={() => validate.mutate(undefined)} loading={validate.isPending}>
              Validate
            </Button>
            <Button color="teal" onClick={() => publish.mutate(undefined)} loading={publish.isPending}>
              Publish
            </Button>
          </Group>
          {validate.data?.ok && !publish.error && (
            <Alert color="teal" role="status">
              The configuration is valid and can be published.{warnings.length > 0 && ' Read the warnings below before you publish.'}
            </Alert>
          )}
          {errors && errors.length > 0 && (
            <Alert color="red" title="Findings" role="alert">
              <FindingList findings={errors} />
            </Alert>
          )}
          {warnings.length > 0 && (
            <Alert color="yellow" title="Warnings (publishable)" role="alert" data-testid="validate-warnings">
              <FindingList findings={warnings} />
            </Alert>
          )}
        </Stack>
      </Paper>
      <Title order={2} fz="h4">
        Versions
      </Title>
      <Loaded q={versions}>
        {() => (
          <Stack>
            <StackTable cols={['Version', 'Status', 'Note', 'Created']} aria-label="Policy versions">
                <Table.Tbody>
                  {list.map((v) => (
                    <Table.Tr key={v.id} data-testid="policy-version">
                      <Table.Td>{v.version}</Table.Td>
                      <Table.Td>{v.active ? <Badge color="teal">active</Badge> : <Badge color="gray">inactive</Badge>}</Table.Td>
                      <Table.Td>{v.note ?? ''}</Table.Td>
                      <Table.Td>{when(v.created_at)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </StackTable>
            {list.length === 0 && <Text c="dimmed">No versions yet.</Text>}
            {list.length >= 2 && (
              <Stack>
                <Group>
                  <Select label="Compare version" allowDeselect={false} w={160} value={left} onChange={setLeft} data={list.map((v) => String(v.version))} />
                  <Select label="with version" allowDeselect={false} w={160} value={right} onChange={setRight} data={list.map((v) => String(v.version))} />
                </Group>
                {byVersion(left) && byVersion(right) && <Diff from={byVersion(left)!.body} to={byVersion(right)!.body} />}
              </Stack>
            )}
          </Stack>
        )}
      </Loaded>
    </Page>
  );
}
