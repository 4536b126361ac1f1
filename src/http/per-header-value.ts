// Decisions a request header's value settles (the Accept header's media type,
// whether a Host names this machine), worked out once per distinct value: every
// request asks, and clients send the same few values. Bounded: past `max`
// values (a client sending a new one each time) the memory starts over.
export function perHeaderValue<V, T>(decide: (value: V) => T, max: number): (value: V) => T {
  const known = new Map<V, T>();
  return (value) => {
    if (known.has(value)) return known.get(value) as T;
    const decided = decide(value);
    if (known.size >= max) known.clear();
    known.set(value, decided);
    return decided;
  };
}
