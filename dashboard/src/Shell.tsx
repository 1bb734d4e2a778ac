import type { ReactNode } from 'react';
import { NavLink as RouterLink, useLocation, useNavigate } from 'react-router';
import { Alert, AppShell, Badge, Box, Burger, Button, Group, NavLink, SegmentedControl, Select, Text } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQueryClient } from '@tanstack/react-query';
import type { Mode } from '@svc/contract';
import { apiClient, ok } from './api';
import { dashboardPath, useWorkspace, WorkspaceProvider } from './session';

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

type ProjectRef = { id: string; name: string };

/** The project and merchant come from the address (App.tsx); choosing one navigates, so a reload keeps it. */
export function Shell({ mode, email, project, projects, merchantId, children }: { mode: Mode; email: string; project: ProjectRef; projects: ProjectRef[]; merchantId: string | null; children: ReactNode }) {
  return (
    <WorkspaceProvider mode={mode} projectId={project.id} merchantId={merchantId}>
      <Frame email={email} project={project} projects={projects}>
        {children}
      </Frame>
    </WorkspaceProvider>
  );
}

function Frame({ email, project, projects, children }: { email: string; project: ProjectRef; projects: ProjectRef[]; children: ReactNode }) {
  const ws = useWorkspace();
  const [opened, { toggle, close }] = useDisclosure();
  const navigate = useNavigate();
  const location = useLocation();
  const queries = useQueryClient();
  const live = ws.mode === 'live';
  // the section of the address: an object page of one mode, project or merchant has no meaning in another
  const section = location.pathname.split('/')[2] ?? '';

  const switchMode = (next: string) => {
    if (next === ws.mode) return;
    // the same project; a merchant is of one mode, so the other mode opens its default merchant
    navigate(dashboardPath(next as Mode, section, { project: project.id }));
  };
  const switchProject = (id: string | null) => {
    if (!id || id === project.id) return;
    navigate(dashboardPath(ws.mode, section, { project: id }));
  };
  const switchMerchant = (id: string | null) => {
    if (!id || id === ws.merchant?.id) return;
    navigate(dashboardPath(ws.mode, section, { project: project.id, merchant: id }));
  };
  const projectOptions = projects.map((p) => ({ value: p.id, label: p.name }));
  const merchantOptions = ws.merchants.map((m) => ({ value: m.id, label: m.name }));
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
            <Select aria-label="Project" w={170} visibleFrom="sm" allowDeselect={false} value={project.id} data={projectOptions} onChange={switchProject} />
            {ws.merchants.length > 0 && (
              <Select aria-label="Merchant" w={180} visibleFrom="sm" allowDeselect={false} value={ws.merchant?.id ?? null} data={merchantOptions} onChange={switchMerchant} />
            )}
            <Text size="sm" c="dimmed" visibleFrom="lg" title={project.name}>
              {email}
            </Text>
            <Button variant="default" size="xs" onClick={signOut}>
              Sign out
            </Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Sections">
        <Select label="Project" aria-label="Project (menu)" hiddenFrom="sm" mb="xs" allowDeselect={false} value={project.id} data={projectOptions} onChange={switchProject} />
        {ws.merchants.length > 0 && (
          <Select label="Merchant" aria-label="Merchant (menu)" hiddenFrom="sm" mb="xs" allowDeselect={false} value={ws.merchant?.id ?? null} data={merchantOptions} onChange={switchMerchant} />
        )}
        {NAV.map((n) => (
          <NavLink key={n.path} component={RouterLink} to={ws.to(n.path)} end={n.path === ''} label={n.label} onClick={close} />
        ))}
      </AppShell.Navbar>
      <AppShell.Main>
        {ws.merchantMissing && (
          <Alert color="red" title="No such merchant here" role="alert" mb="md">
            The address names merchant {ws.merchantMissing}, which is not one of {project.name}'s {ws.mode}-mode merchants. Pick a merchant above.
          </Alert>
        )}
        {children}
      </AppShell.Main>
    </AppShell>
  );
}
