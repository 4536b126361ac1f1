// What a server's tools/call answer may put in the log (docs/mcp.md "Names,
// arguments, results"): the answer is attacker-influenced and every client
// reads it. The SDK has checked its shape (content blocks, base64); here each
// part is screened before it is kept (`plugin/mcp/result`) or read by the
// model (the call's `tool/result`):
// - a media type is a media type (`type/subtype`, at most 255 characters), else
//   it is application/octet-stream;
// - a URI is a URL of at most 2048 characters, and not one a browser would run
//   (javascript:, vbscript:, data:); a part naming another is replaced by a text
//   part saying why;
// - binary data (images, audio, blobs) is kept up to MAX_KEPT_BINARY_CHARS of
//   base64 each, else its size is kept instead; the whole kept result is at
//   most MAX_KEPT_RESULT_CHARS, past which text is cut and parts dropped, and
//   `truncated` says so; structured content holding more distinct keys than an
//   event may (core/storable.ts), or nested deeper than JSON.stringify can
//   write, is dropped too;
// - fields the specification does not name (`_meta`, anything else) are not kept;
// - the text the model reads has its terminal escapes dropped and other hidden
//   characters shown (core/visible-text.ts), as the shell's output has.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { visibleOutput, visibleText } from '../../core/visible-text.ts';
import { tooManyKeys } from '../../core/storable.ts';

/** A result kept up to this size (JSON characters): past it, text is cut and parts dropped. */
const MAX_KEPT_RESULT_CHARS = 1_000_000;
/** One binary part (base64) kept up to this; a larger one is kept as its size. */
const MAX_KEPT_BINARY_CHARS = 256 * 1024;
/** What the model reads of one result at most (about 25,000 tokens, as other MCP hosts cut): the rest is cut with a note saying so. */
const MAX_RESULT_TEXT_CHARS = 100_000;
const MAX_URI_CHARS = 2048;
const MAX_NAME_CHARS = 200;
/** RFC 6838's type/subtype, with parameters. */
const MEDIA_TYPE = /^[A-Za-z0-9][\w!#$&^.+-]{0,126}\/[A-Za-z0-9][\w!#$&^.+-]{0,126}(\s*;\s*[\w!#$&^.+-]+=("[^"\\\r\n]*"|[\w!#$&^.+-]+))*$/;
const RUNNABLE_SCHEMES = new Set(['javascript:', 'vbscript:', 'data:']);

type Content = CallToolResult['content'][number];
type ScreenedPart =
  | { type: 'text'; text: string }
  | { type: 'image' | 'audio'; mimeType: string; data?: string; bytes: number }
  | { type: 'resource_link'; uri: string; name?: string; title?: string; description?: string; mimeType?: string }
  | { type: 'resource'; resource: { uri: string; mimeType?: string; text?: string; blob?: string; bytes?: number } };

export interface ScreenedResult {
  content: ScreenedPart[];
  structuredContent?: Record<string, unknown>;
  isError: boolean;
  /** Something was cut or left out to keep the result within its bounds. */
  truncated?: true;
}

const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/**
 * Structured content as JSON text, or undefined when it nests deeper than JSON.stringify's stack reaches (a line of
 * 600 KB nests 100,000 objects: JSON.parse reads it, writing it back throws). Such content is left out, as the log
 * leaves out what it cannot hold (core/storable.ts toStorableJson): before, the throw made the call an error,
 * "Maximum call stack size exceeded", in place of what the server answered, and nothing of it was kept.
 */
function jsonOf(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}
/** The bytes base64 text stands for ("=" pads the last group). */
const bytesOf = (base64: string) => Math.floor((base64.length * 3) / 4) - (base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0);

/** A media type as it may be kept, or application/octet-stream. */
function mediaType(m: string | undefined): string | undefined {
  if (m === undefined) return undefined;
  return m.length <= 255 && MEDIA_TYPE.test(m) ? m : 'application/octet-stream';
}

/** Why a URI is not kept, or undefined. */
function uriProblem(uri: string): string | undefined {
  if (uri.length > MAX_URI_CHARS) return `its URI is over ${MAX_URI_CHARS} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'its URI is not a URL';
  }
  if (RUNNABLE_SCHEMES.has(url.protocol)) return `its URI is a ${url.protocol} one`;
  return undefined;
}

const named = (s: string | undefined) => (s === undefined ? undefined : visibleText(cut(s, MAX_NAME_CHARS)));

/** The result screened: every part checked, the whole within MAX_KEPT_RESULT_CHARS. */
export function screenResult(result: CallToolResult): ScreenedResult {
  let budget = MAX_KEPT_RESULT_CHARS;
  let truncated = false;
  /** Takes up to `n` characters of the budget; answers how many it got. */
  const take = (n: number) => {
    const got = Math.max(0, Math.min(n, budget));
    budget -= got;
    if (got < n) truncated = true;
    return got;
  };
  const text = (t: string) => {
    const n = take(t.length);
    return n < t.length ? t.slice(0, n) : t;
  };
  const binary = (data: string) => {
    if (data.length > MAX_KEPT_BINARY_CHARS) {
      truncated = true;
      return undefined;
    }
    return take(data.length) === data.length ? data : undefined;
  };
  const refused = (kind: string, why: string): ScreenedPart => ({ type: 'text', text: `[${kind} not kept: ${why}]` });

  const content: ScreenedPart[] = [];
  for (const c of (result.content ?? []) as Content[]) {
    if (budget <= 0) {
      truncated = true;
      break;
    }
    take(100); // each part's own fields
    switch (c.type) {
      case 'text':
        content.push({ type: 'text', text: text(c.text) });
        break;
      case 'image':
      case 'audio': {
        const data = binary(c.data);
        content.push({ type: c.type, mimeType: mediaType(c.mimeType)!, bytes: bytesOf(c.data), ...(data === undefined ? {} : { data }) });
        break;
      }
      case 'resource_link': {
        const problem = uriProblem(c.uri);
        if (problem) {
          content.push(refused('resource link', problem));
          break;
        }
        take(c.uri.length);
        const [name, title, description] = [named(c.name), named(c.title), c.description === undefined ? undefined : text(cut(c.description, 2000))];
        content.push({
          type: 'resource_link',
          uri: c.uri,
          ...(name === undefined ? {} : { name }),
          ...(title === undefined ? {} : { title }),
          ...(description === undefined ? {} : { description }),
          ...(c.mimeType === undefined ? {} : { mimeType: mediaType(c.mimeType) }),
        });
        break;
      }
      case 'resource': {
        const r = c.resource;
        const problem = uriProblem(r.uri);
        if (problem) {
          content.push(refused('resource', problem));
          break;
        }
        take(r.uri.length);
        const kept: Extract<ScreenedPart, { type: 'resource' }>['resource'] = {
          uri: r.uri,
          ...(r.mimeType === undefined ? {} : { mimeType: mediaType(r.mimeType) }),
        };
        if ('text' in r && typeof r.text === 'string') kept.text = text(r.text);
        else if ('blob' in r && typeof r.blob === 'string') {
          const blob = binary(r.blob);
          kept.bytes = bytesOf(r.blob);
          if (blob !== undefined) kept.blob = blob;
        }
        content.push({ type: 'resource', resource: kept });
        break;
      }
      default:
        content.push(refused('part', `"${named(String((c as { type: unknown }).type))}" is not a content type`));
    }
  }
  let structuredContent: Record<string, unknown> | undefined;
  if (result.structuredContent !== undefined) {
    const json = jsonOf(result.structuredContent);
    // Within the characters, it may still hold more distinct keys than an event takes at any door (core/storable.ts).
    if (json !== undefined && take(json.length) === json.length && !tooManyKeys(result.structuredContent)) structuredContent = result.structuredContent;
    else truncated = true;
  }
  return {
    content,
    ...(structuredContent === undefined ? {} : { structuredContent }),
    isError: result.isError === true,
    ...(truncated ? { truncated: true as const } : {}),
  };
}

/** What the model reads of a result: its text, a line for each other part (as screened), at most MAX_RESULT_TEXT_CHARS (a cut said so). */
export function resultText(whole: CallToolResult, screened: ScreenedResult): string {
  const parts: string[] = [];
  let chars = 0; // the text's length before the screen cut it
  const raw = (whole.content ?? []) as Content[];
  screened.content.forEach((c, i) => {
    const r = raw[i];
    switch (c.type) {
      case 'text':
        parts.push(c.text);
        chars += r?.type === 'text' ? r.text.length : c.text.length;
        return;
      case 'image':
      case 'audio':
        parts.push(`[${c.type}: ${c.mimeType}, ${c.bytes} bytes]`);
        break;
      case 'resource_link':
        parts.push(`[resource link: ${visibleText(c.uri)}${c.name ? ` (${c.name})` : ''}]`);
        break;
      case 'resource':
        parts.push(c.resource.text ?? `[resource: ${visibleText(c.resource.uri)}${c.resource.mimeType ? `, ${c.resource.mimeType}` : ''}]`);
        if (c.resource.text !== undefined && r?.type === 'resource' && 'text' in r.resource) {
          chars += String(r.resource.text).length;
          return;
        }
        break;
    }
    chars += parts.at(-1)!.length;
  });
  chars += Math.max(0, parts.length - 1);
  // Structured content alone is the answer the model reads (cut as text is).
  if (parts.length === 0 && whole.structuredContent) {
    const json = jsonOf(whole.structuredContent) ?? '[structured content nested too deeply to be read]';
    parts.push(json.slice(0, MAX_RESULT_TEXT_CHARS));
    chars = json.length;
  }
  const text = visibleOutput(parts.join('\n'));
  // Parts past what is kept (MAX_KEPT_RESULT_CHARS, each part counted at least 100) are not read either: before, 400,000
  // small parts reached the model as the first 9,185 of them, 90,730 characters, and nothing said the rest were missing.
  const left = raw.length - screened.content.length;
  const long = chars > MAX_RESULT_TEXT_CHARS || text.length > MAX_RESULT_TEXT_CHARS;
  if (!long && left <= 0) return text;
  const notes = [
    ...(long ? [`the result was ${chars.toLocaleString('en-US')} characters; the first ${MAX_RESULT_TEXT_CHARS.toLocaleString('en-US')} are shown`] : []),
    ...(left > 0 ? [`${left.toLocaleString('en-US')} of its ${raw.length.toLocaleString('en-US')} parts are left out`] : []),
  ];
  return `${text.slice(0, MAX_RESULT_TEXT_CHARS)}\n[cut: ${notes.join('; ')}]`;
}
