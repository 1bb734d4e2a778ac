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

/**
 * A dashboard address inside a mode, carrying the project and the merchant as query
 * parameters (`/test/orders?project=proj_…&merchant=mch_…`): what the pages show is decided
 * by the address alone, so a reload, a bookmark or a shared link opens the same shop
 * (docs/dashboard.md, "Projects and merchants in the address"). A path's own query is kept.
 */
export function dashboardPath(mode: Mode, path: string, select: { project?: string | null; merchant?: string | null }): string {
  const [pathname = '', query = ''] = path.replace(/^\//, '').split('?');
  const params = new URLSearchParams(query);
  if (select.project) params.set('project', select.project);
  if (select.merchant) params.set('merchant', select.merchant);
  const search = params.toString();
  return `/${mode}/${pathname}${search ? `?${search}` : ''}`;
}

export type Workspace = {
  mode: Mode;
  /** The project every call works in (the Svc-Project header). */
  projectId: string;
  api: Api;
  /** The merchant every merchant-scoped page works on: the address's `merchant`, else the project's default. */
  merchant: Merchant | null;
  merchants: Merchant[];
  merchantsLoading: boolean;
  /** The address named a merchant that is not among this project's merchants of this mode. */
  merchantMissing: string | null;
  /** Query keys are prefixed with the mode and project, so one mode's or project's data is never shown in another. */
  key: (...parts: unknown[]) => unknown[];
  /** `{ merchant_id }` for merchant-scoped calls. */
  mq: z.input<typeof MerchantIdQuery>;
  /** A path inside this mode, project and merchant: `to('orders')` → `/test/orders?project=…&merchant=…`. */
  to: (path: string) => string;
};

const Ctx = createContext<Workspace | null>(null);

export function WorkspaceProvider({ mode, projectId, merchantId, children }: { mode: Mode; projectId: string; merchantId: string | null; children: ReactNode }) {
  const api = useMemo(() => apiClient(mode, projectId), [mode, projectId]);
  const merchants = useQuery({ queryKey: [mode, projectId, 'merchants'], queryFn: () => listMerchants(api) });
  // one array per answer, so the workspace below is rebuilt only when the merchants change
  const list = useMemo(() => merchants.data ?? [], [merchants.data]);
  const named = merchantId ? (list.find((m) => m.id === merchantId) ?? null) : null;
  const merchant = named ?? (merchantId ? null : (list.find((m) => m.is_default) ?? list[0] ?? null));
  const merchantMissing = merchantId && merchants.isSuccess && !named ? merchantId : null;
  const value = useMemo<Workspace>(
    () => ({
      mode,
      projectId,
      api,
      merchant,
      merchants: list,
      merchantsLoading: merchants.isLoading,
      merchantMissing,
      key: (...parts) => [mode, projectId, merchant?.id ?? null, ...parts],
      mq: merchant ? { merchant_id: merchant.id } : {},
      to: (path) => dashboardPath(mode, path, { project: projectId, merchant: merchant?.id ?? merchantId }),
    }),
    [mode, projectId, api, merchant, merchantId, merchantMissing, list, merchants.isLoading],
  );
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useWorkspace(): Workspace {
  const ws = useContext(Ctx);
  if (!ws) throw new Error('useWorkspace outside WorkspaceProvider');
  return ws;
}
