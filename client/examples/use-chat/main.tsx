/** @jsxImportSource react */
// The smallest useChat page against forkline (docs/api.md, "useChat"): the
// AI SDK's default transport, given forkline's /chat and, when the service
// asks for one, a token. Nothing else: forkline keeps the conversation, and a
// reload resumes the answer in progress (`resume: true`). A call that needs
// approval shows Approve and Deny; the response goes back by itself.
// Query parameters: `api` (default /chat), `chat` (the chat id; default: one
// kept in localStorage), `token` (sent as a bearer token).
import { StrictMode, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai';

const params = new URLSearchParams(location.search);
const api = params.get('api') ?? '/chat';
const token = params.get('token');
const chatId = params.get('chat') ?? localStorage.getItem('forkline-chat') ?? crypto.randomUUID();
localStorage.setItem('forkline-chat', chatId);

/** What forkline puts in each answer's metadata. */
type Metadata = { sessionId: string; inputId: string; turn?: number; reason?: string; awaitingApproval?: string };

const transport = new DefaultChatTransport<UIMessage<Metadata>>({
  api,
  headers: token ? { authorization: `Bearer ${token}` } : undefined,
});

function Chat() {
  const { messages, sendMessage, regenerate, addToolApprovalResponse, status, error } = useChat<UIMessage<Metadata>>({
    id: chatId,
    transport,
    resume: true,
    // An approval response is sent as soon as the call is decided: forkline decides it and streams the rest.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState('');
  const last = messages.at(-1);
  return (
    <main data-status={status}>
      {messages.map((m) => (
        <article key={m.id} data-role={m.role} data-session={m.metadata?.sessionId}>
          {m.parts.map((part, i) => {
            if (part.type === 'text') return <p key={i}>{part.text}</p>;
            if (part.type === 'dynamic-tool')
              return (
                <pre key={i} data-tool={part.toolName} data-state={part.state}>
                  {part.toolName}({JSON.stringify(part.input)}){' '}
                  {part.state === 'output-available' ? `→ ${String(part.output)}` : part.state === 'output-error' ? `✗ ${part.errorText}` : '…'}
                  {part.state === 'approval-requested' && (
                    <>
                      <button type="button" onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: true })}>
                        Approve
                      </button>
                      <button
                        type="button"
                        onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'denied in the page' })}
                      >
                        Deny
                      </button>
                    </>
                  )}
                </pre>
              );
            return null;
          })}
        </article>
      ))}
      {error && <p role="alert">{error.message}</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!input.trim()) return;
          void sendMessage({ text: input });
          setInput('');
        }}
      >
        <textarea aria-label="Message" value={input} onChange={(e) => setInput(e.target.value)} />
        <button type="submit" disabled={status === 'submitted' || status === 'streaming'}>
          Send
        </button>
        <button type="button" onClick={() => void regenerate()} disabled={last?.role !== 'assistant' || status === 'submitted' || status === 'streaming'}>
          Regenerate
        </button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <Chat />
  </StrictMode>,
);
