import { useState } from 'react';
import { Button, Group, Text } from '@mantine/core';

/** Cursor pagination over a list envelope: a stack of cursors, so Previous is exact. */
export function useCursor(resetKey: string) {
  const [state, setState] = useState<{ key: string; stack: (string | undefined)[] }>({ key: resetKey, stack: [undefined] });
  const stack = state.key === resetKey ? state.stack : [undefined];
  const cursor = stack[stack.length - 1];
  return {
    cursor,
    page: stack.length,
    next: (c: string) => setState({ key: resetKey, stack: [...stack, c] }),
    prev: () => setState({ key: resetKey, stack: stack.slice(0, -1) }),
  };
}

export function Pager({ page, hasMore, nextCursor, onNext, onPrev }: { page: number; hasMore: boolean; nextCursor: string | null; onNext: (c: string) => void; onPrev: () => void }) {
  return (
    <Group justify="flex-end" gap="xs">
      <Button variant="default" size="xs" disabled={page <= 1} onClick={onPrev}>
        Previous
      </Button>
      <Text size="sm" c="dimmed" aria-live="polite">
        Page {page}
      </Text>
      <Button variant="default" size="xs" disabled={!hasMore || !nextCursor} onClick={() => nextCursor && onNext(nextCursor)}>
        Next
      </Button>
    </Group>
  );
}
