import { Alert, Button, Code, CopyButton, Group, Modal, Stack, Text } from '@mantine/core';

/** A secret the server returns once: shown in a dialog with a copy button, then gone. */
export function SecretOnce({ secret, title, onClose }: { secret: string | null; title: string; onClose: () => void }) {
  return (
    <Modal opened={secret !== null} onClose={onClose} title={title} centered size="lg">
      <Stack>
        <Alert color="yellow" role="alert">
          Copy it now: it is shown this once and cannot be retrieved later.
        </Alert>
        <Code block data-testid="secret-once" style={{ wordBreak: 'break-all' }}>
          {secret}
        </Code>
        <Group justify="flex-end">
          <CopyButton value={secret ?? ''}>{({ copied, copy }) => <Button variant="default" onClick={copy}>{copied ? 'Copied' : 'Copy'}</Button>}</CopyButton>
          <Button onClick={onClose}>Done</Button>
        </Group>
        <Text size="xs" c="dimmed">
          Store it in your secret manager; anyone with it can act as you.
        </Text>
      </Stack>
    </Modal>
  );
}
