import { useState, type ReactNode } from 'react';
import { NavLink as RouterLink, useLocation, useNavigate } from 'react-router';
import { AppShell, Badge, Box, Burger, Button, Group, NavLink, SegmentedControl, Select, Text } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQueryClient } from '@tanstack/react-query';
import type { Mode } from '@svc/contract';
import { apiClient, ok } from './api';
import { useWorkspace, WorkspaceProvider } from './session';

const NAV: { path: string; label: string }[] = [
  { path: '', label: 'Overview' },
  { path: 'orders', label: 'Orders' },
  { path: 'holds', label: 'Holds' },
  { path: 'catalog', label: 'Catalog' },
  { path: 'receiving', label: 'Receiving' },
  { path: 'policy', label: 'Policy' },
  { path: 'webhooks', label: 'Webhooks' },
  { path: 'developers', label: 'Developers' },
  { path: 'reputation', label: 'Reputation' },
  { path: 'merchants', label: 'Merchants' },
];

const merchantKey = (mode: Mode) => `svc.merchant.${mode}`;

export function Shell({ mode, email, project, children }: { mode: Mode; email: string; project: string; children: ReactNode }) {
  // the Shell is keyed by mode, so each mode keeps its own merchant choice
  const [merchantId, setMerchantId] = useState<string | null>(() => localStorage.getItem(merchantKey(mode)));
  return (
    <WorkspaceProvider mode={mode} merchantId={merchantId}>
      <Frame
        email={email}
        project={project}
        onMerchant={(id) => {
          localStorage.setItem(merchantKey(mode), id);
          setMerchantId(id);
        }}
      >
        {children}
      </Frame>
    </WorkspaceProvider>
  );
}

function Frame({ email, project, onMerchant, children }: { email: string; project: string; onMerchant: (id: string) => void; children: ReactNode }) {
  const ws = useWorkspace();
  const [opened, { toggle, close }] = useDisclosure();
  const navigate = useNavigate();
  const location = useLocation();
  const queries = useQueryClient();
  const live = ws.mode === 'live';

  const switchMode = (next: string) => {
    if (next === ws.mode) return;
    // the same section in the other mode; an object page of one mode has no meaning in the other
    const section = location.pathname.split('/')[2] ?? '';
    navigate(`/${next}/${section}`);
  };
  const signOut = async () => {
    await ok(apiClient(ws.mode).auth.logout({})).catch(() => undefined);
    queries.clear();
    navigate('/login');
  };

  return (
    <AppShell header={{ height: 92 }} navbar={{ width: 210, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Box
          data-testid="mode-banner"
          data-mode={ws.mode}
          bg={live ? 'teal.7' : 'orange.5'}
          c="white"
          px="md"
          py={4}
          fw={700}
          fz="sm"
          role="status"
        >
          {live ? 'LIVE MODE: real payments in USDC on chain' : 'TEST MODE: test data, no real money moves'}
        </Box>
        <Group h={60} px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Text fw={700} visibleFrom="xs">
              svc-checkout
            </Text>
            <SegmentedControl
              aria-label="Mode"
              value={ws.mode}
              onChange={switchMode}
              color={live ? 'teal' : 'orange'}
              data={[
                { value: 'test', label: 'Test' },
                { value: 'live', label: 'Live' },
              ]}
            />
            <Badge color={live ? 'teal' : 'orange'} variant="light" visibleFrom="md">
              {live ? 'Live' : 'Test'} data
            </Badge>
          </Group>
          <Group gap="sm" wrap="nowrap">
            {ws.merchants.length > 0 && (
              <Select
                aria-label="Merchant"
                w={180}
                visibleFrom="xs"
                allowDeselect={false}
                value={ws.merchant?.id ?? null}
                data={ws.merchants.map((m) => ({ value: m.id, label: m.name }))}
                onChange={(v) => v && onMerchant(v)}
              />
            )}
            <Text size="sm" c="dimmed" visibleFrom="md" title={project}>
              {email}
            </Text>
            <Button variant="default" size="xs" onClick={signOut}>
              Sign out
            </Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Sections">
        {ws.merchants.length > 0 && (
          <Select
            aria-label="Merchant (menu)"
            hiddenFrom="xs"
            mb="xs"
            allowDeselect={false}
            value={ws.merchant?.id ?? null}
            data={ws.merchants.map((m) => ({ value: m.id, label: m.name }))}
            onChange={(v) => v && onMerchant(v)}
          />
        )}
        {NAV.map((n) => (
          <NavLink key={n.path} component={RouterLink} to={ws.to(n.path)} end={n.path === ''} label={n.label} onClick={close} />
        ))}
      </AppShell.Navbar>
      <AppShell.Main>
        {children}
      </AppShell.Main>
    </AppShell>
  );
}
