// The page-wide word on the connection (api.ts's ConnectionProblem): a
// rejected token with a field for another, the server's "wait", or an
// unreachable server with Retry. A row of its own above the page (layout.css), so
// it covers none of the page's title and buttons.
import { useEffect, useState } from 'preact/hooks';
import { currentProblem, retryNow, setToken, watchProblem, type ConnectionProblem } from './api.ts';

export function useConnectionProblem(): ConnectionProblem {
  const [problem, setProblem] = useState(currentProblem);
  useEffect(() => watchProblem(setProblem), []);
  return problem;
}

export function ConnectionBanner() {
  const problem = useConnectionProblem();
  const [, tick] = useState(0);
  useEffect(() => {
    if (problem?.kind !== 'rate-limited') return;
    const timer = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(timer);
  }, [problem]);
  if (!problem) return null;
  return (
    <div class="connection-banner" role="alert" data-testid="connection-problem" data-kind={problem.kind}>
      {problem.kind === 'token-rejected' && (
        <>
          <strong>Token rejected.</strong> The server did not accept this dashboard's API token; nothing is retried until you enter another.
          <TokenForm />
        </>
      )}
      {problem.kind === 'rate-limited' && (
        <>
          <strong>The server asked us to wait.</strong> Trying again in {Math.max(0, Math.ceil((problem.until - Date.now()) / 1000))} s.
        </>
      )}
      {problem.kind === 'unreachable' && (
        <>
          <strong>Server unreachable.</strong> Trying again as soon as it answers.{' '}
          <button type="button" class="small" onClick={retryNow}>
            Retry now
          </button>
        </>
      )}
    </div>
  );
}

export function TokenForm() {
  const [value, setValue] = useState('');
  return (
    <form
      class="token-form"
      onSubmit={(e) => {
        e.preventDefault();
        setToken(value.trim());
      }}
    >
      <input type="password" placeholder="API token" aria-label="API token" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      <button type="submit">Use token</button>
    </form>
  );
}
