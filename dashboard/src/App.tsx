import { useEffect } from 'react';
import { Navigate, Route, Routes, useLocation, useNavigate, useParams } from 'react-router';
import { Center, Loader } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Mode } from '@svc/contract';
import { apiClient, ok, onUnauthenticated } from './api';
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

function ModeRoutes() {
  const params = useParams();
  const parsed = Mode.safeParse(params.mode);
  const me = useQuery({ queryKey: ['me'], queryFn: () => ok(apiClient('test').me.get()), retry: false, staleTime: 60_000 });
  useEffect(() => {
    if (parsed.success) localStorage.setItem(LAST_MODE, parsed.data);
  }, [parsed.success, parsed.data]);
  if (!parsed.success) return <Navigate to="/test/" replace />;
  if (me.isLoading || me.isError)
    return (
      <Center h="100vh">
        <Loader aria-label="Loading" />
      </Center>
    );
  return (
    <Shell key={parsed.data} mode={parsed.data} email={me.data?.user?.email ?? ''} project={me.data?.project.name ?? ''}>
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
