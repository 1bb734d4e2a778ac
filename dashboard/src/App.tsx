import { useEffect } from 'react';
import { Link, Navigate, Route, Routes, useLocation, useNavigate, useParams, useSearchParams } from 'react-router';
import { Alert, Button, Center, Loader, Stack } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Mode } from '@svc/contract';
import { SvcApiError } from '@svc/sdk/errors';
import { apiClient, errorText, ok, onUnauthenticated } from './api';
import { Shell } from './Shell';
import { LoginPage, clearNext, pendingNext, rememberNext } from './pages/Login';
import { DevicePage } from './pages/Device';
import { OverviewPage } from './pages/Overview';
import { OrdersPage, OrderPage } from './pages/Orders';
import { HoldsPage, HoldPage } from './pages/Holds';
import { CatalogPage } from './pages/Catalog';
import { ReceivingPage } from './pages/Receiving';
import { PolicyPage } from './pages/Policy';
import { WebhooksPage, EventPage } from './pages/Webhooks';
import { DevelopersPage } from './pages/Developers';
import { ReputationPage } from './pages/Reputation';
import { MerchantsPage } from './pages/Merchants';

const LAST_MODE = 'svc.mode';

export function App() {
  const navigate = useNavigate();
  const location = useLocation();
  // any 401 (expired or signed-out session) goes to sign-in and comes back here afterwards
  useEffect(
    () =>
      onUnauthenticated(() => {
        if (location.pathname.startsWith('/login') || location.pathname.startsWith('/device')) return;
        rememberNext(location.pathname + location.search);
        navigate('/login', { replace: true });
      }),
    [location, navigate],
  );
  return (
    <Routes>
      <Route path="/login" element={<LoginPage />} />
      <Route path="/device" element={<DevicePage />} />
      <Route path="/" element={<Home />} />
      <Route path="/:mode/*" element={<ModeRoutes />} />
    </Routes>
  );
}

/** `/dashboard/`: where a sign-in link lands; goes on to the page that asked for sign-in, else the last mode. */
function Home() {
  const next = pendingNext();
  useEffect(() => clearNext(), []);
  if (next) return <Navigate to={next} replace />;
  const last = Mode.safeParse(localStorage.getItem(LAST_MODE));
  return <Navigate to={`/${last.success ? last.data : 'test'}/`} replace />;
}

/**
 * `/:mode/*?project=…&merchant=…`: the address decides the project and the merchant (the
 * server checks the project is the member's: Svc-Project answers 404 for any other).
 */
function ModeRoutes() {
  const params = useParams();
  const [search] = useSearchParams();
  const parsed = Mode.safeParse(params.mode);
  const projectParam = search.get('project');
  const me = useQuery({ queryKey: ['me', projectParam], queryFn: () => ok(apiClient('test', projectParam).me.get()), retry: false, staleTime: 60_000 });
  useEffect(() => {
    if (parsed.success) localStorage.setItem(LAST_MODE, parsed.data);
  }, [parsed.success, parsed.data]);
  if (!parsed.success) return <Navigate to="/test/" replace />;
  if (me.error instanceof SvcApiError && me.error.status === 404)
    return (
      <Center h="100vh" p="md">
        <Stack maw={520}>
          <Alert color="red" title="No such project among yours" role="alert">
            {errorText(me.error)} The address names a project you are not a member of, or one that does not exist.
          </Alert>
          <Button component={Link} to={`/${parsed.data}/`} w="fit-content">
            Open your project
          </Button>
        </Stack>
      </Center>
    );
  if (me.isLoading || me.isError || !me.data)
    return (
      <Center h="100vh">
        <Loader aria-label="Loading" />
      </Center>
    );
  return (
    <Shell
      key={`${parsed.data}:${me.data.project.id}`}
      mode={parsed.data}
      email={me.data.user?.email ?? ''}
      project={me.data.project}
      projects={me.data.projects}
      merchantId={search.get('merchant')}
    >
      <Routes>
        <Route index element={<OverviewPage />} />
        <Route path="orders" element={<OrdersPage />} />
        <Route path="orders/:sessionId" element={<OrderPage />} />
        <Route path="holds" element={<HoldsPage />} />
        <Route path="holds/:sessionId" element={<HoldPage />} />
        <Route path="catalog" element={<CatalogPage />} />
        <Route path="receiving" element={<ReceivingPage />} />
        <Route path="policy" element={<PolicyPage />} />
        <Route path="webhooks" element={<WebhooksPage />} />
        <Route path="webhooks/events/:eventId" element={<EventPage />} />
        <Route path="developers" element={<DevelopersPage />} />
        <Route path="reputation" element={<ReputationPage />} />
        <Route path="merchants" element={<MerchantsPage />} />
        <Route path="*" element={<Navigate to="." replace />} />
      </Routes>
    </Shell>
  );
}
