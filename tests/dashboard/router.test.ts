// Every address the dashboard has, parsed the same way since the router moved
// onto preact-iso (the browser tests walk them end to end).
import { describe, expect, it } from 'vitest';
import { DASHBOARD_LINKS, diffPath, eventPath, parseRoute, sessionPath } from '../../client/dashboard/src/router.ts';

describe('parseRoute', () => {
  // An address with no page is said to be one (not-found), not shown as the home page.
  it.each([
    ['/', '', { name: 'home' }],
    ['/nowhere', '', { name: 'not-found', path: '/nowhere' }],
    ['/sessions', '', { name: 'not-found', path: '/sessions' }],
    ['/sessions/', '', { name: 'not-found', path: '/sessions/' }],
    ['/sessions/ses_1', '', { name: 'session', id: 'ses_1' }],
    ['/sessions/ses_1/', '', { name: 'session', id: 'ses_1' }],
    ['/sessions/a%2Fb%20c', '', { name: 'session', id: 'a/b c' }],
    ['/sessions/ses_1', '#seq-42', { name: 'session', id: 'ses_1', seq: 42 }],
    ['/sessions/ses_1', '#other', { name: 'session', id: 'ses_1' }],
    ['/sessions/ses_1/compare', '', { name: 'compare', id: 'ses_1' }],
    ['/sessions/ses_1/compare/', '', { name: 'compare', id: 'ses_1' }],
    ['/sessions/ses_1/other', '', { name: 'not-found', path: '/sessions/ses_1/other' }],
    ['/compare/ses_a/ses_b', '', { name: 'diff', a: 'ses_a', b: 'ses_b' }],
    ['/compare/ses_a/ses_b/', '', { name: 'diff', a: 'ses_a', b: 'ses_b' }],
    ['/compare/ses_a', '', { name: 'not-found', path: '/compare/ses_a' }],
    ['/compare/ses_a/ses_b/c', '', { name: 'not-found', path: '/compare/ses_a/ses_b/c' }],
    ['/', '#/s/ses_1', { name: 'session', id: 'ses_1' }],
    ['/', '#/s/ses_1/e/7', { name: 'session', id: 'ses_1', seq: 7 }],
    ['/sessions/other', '#/s/ses%201/e/7/', { name: 'session', id: 'ses 1', seq: 7 }],
    ['/compare/x/y', '#/s/ses_1/e/x', { name: 'diff', a: 'x', b: 'y' }],
  ])('%s%s', (path, hash, route) => {
    expect(parseRoute(path, hash)).toEqual(route);
  });

  it('reads back the paths the dashboard links to', () => {
    expect(parseRoute(sessionPath('a/b'))).toEqual({ name: 'session', id: 'a/b' });
    expect(parseRoute(diffPath('x y', 'z'))).toEqual({ name: 'diff', a: 'x y', b: 'z' });
    const [p, h] = eventPath('ses_1', 3).split('#');
    expect(parseRoute(p, `#${h}`)).toEqual({ name: 'session', id: 'ses_1', seq: 3 });
  });
});

it('routes only the dashboard links in the page (GraphiQL and downloads load as usual)', () => {
  for (const href of ['/', '/#/s/x', '/sessions/x', '/sessions/x#seq-1', '/compare/a/b']) expect(DASHBOARD_LINKS.test(href), href).toBe(true);
  for (const href of ['/graphql', '/recordings/x', '/metrics', 'https://example.com/sessions/x', '/sessionsx'])
    expect(DASHBOARD_LINKS.test(href), href).toBe(false);
});
