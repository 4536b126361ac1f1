// A lease token that is not the one a claim answered, for tests of a stale or
// forged token. Tokens are drawn at random over a GraphQL Int (0..2^31-1), so
// `token + 100` may leave the Int's range (refused as BAD_USER_INPUT, not
// LEASE_LOST) and any other drawn number may be the token itself: flipping
// its lowest bit differs from it for certain and stays in range.

/** Another token than `token`, for certain, in 0..2^31-1. */
export const anotherToken = (token: number): number => token ^ 1;
