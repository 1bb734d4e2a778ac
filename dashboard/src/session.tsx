import { createContext, useContext, useMemo, type ReactNode } from 'react';
import { useQuery } from '@tanstack/react-query';
import type { MerchantIdQuery, Mode } from '@svc/contract';
import type { z } from 'zod';
import { apiClient, ok, type Api } from './api';

type Merchant = Awaited<ReturnType<typeof listMerchants>>[number];

async function listMerchants(api: Api) {
  const page = await ok(api.merchants.list({ query: { limit: 100 } }));
  return page.data;
}

export type Workspace = {
  mode: Mode;
  api: Api;
  /** The merchant every merchant-scoped page works on (the project's default unless chosen). */
  merchant: Merchant | null;
  merchants: Merchant[];
  merchantsLoading: boolean;
  /** Query keys are prefixed with the mode, so one mode's data is never shown in the other. */
  key: (...parts: unknown[]) => unknown[];
  /** `{ merchant_id }` for merchant-scoped calls. */
  mq: z.input<typeof MerchantIdQuery>;
  /** A path inside this mode: `to('orders')` → `/test/orders`. */
  to: (path: string) => string;
};

const Ctx = createContext<Workspace | null>(null);

export function WorkspaceProvider({ mode, merchantId, children }: { mode: Mode; merchantId: string | null; children: ReactNode }) {
  const api = useMemo(() => apiClient(mode), [mode]);
  const merchants = useQuery({ queryKey: [mode, 'merchants'], queryFn: () => listMerchants(api) });
  // one array per answer, so the workspace below is rebuilt only when the merchants change
  const list = useMemo(() => merchants.data ?? [], [merchants.data]);
  const merchant = list.find((m) => m.id === merchantId) ?? list.find((m) => m.is_default) ?? list[0] ?? null;
  const value = useMemo<Workspace>(
    () => ({
      mode,
      api,
      merchant,
      merchants: list,
      merchantsLoading: merchants.isLoading,
      key: (...parts) => [mode, merchant?.id ?? null, ...parts],
      mq: merchant ? { merchant_id: merchant.id } : {},
      to: (path) => `/${mode}/${path.replace(/^\//, '')}`,
    }),
    [mode, api, merchant, list, merchants.isLoading],
  );
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useWorkspace(): Workspace {
  const ws = useContext(Ctx);
  if (!ws) throw new Error('useWorkspace outside WorkspaceProvider');
  return ws;
}
