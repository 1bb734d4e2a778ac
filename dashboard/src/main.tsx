import '@mantine/core/styles.css';
import '@mantine/charts/styles.css';
import '@mantine/notifications/styles.css';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { Badge, createTheme, MantineProvider } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { BrowserRouter } from 'react-router';
import { SvcApiError } from '@svc/sdk/errors';
import { App } from './App';

// A badge is a status word: in a narrow table cell or a nowrap group it keeps its width (the
// table scrolls) rather than shrinking to "SUCCEED…" or "ACC…".
const theme = createTheme({
  components: { Badge: Badge.extend({ styles: { root: { flexShrink: 0, minWidth: 'max-content' } } }) },
});

const queries = new QueryClient({
  defaultOptions: {
    queries: {
      // a 4xx will not change by asking again
      retry: (count, err) => !(err instanceof SvcApiError && err.status >= 400 && err.status < 500) && count < 2,
      refetchOnWindowFocus: false,
    },
  },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <MantineProvider theme={theme} defaultColorScheme="light">
      <Notifications position="top-right" limit={3} autoClose={3000} />
      <QueryClientProvider client={queries}>
        <BrowserRouter basename="/dashboard">
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
