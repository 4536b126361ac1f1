import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { printedSchema, SCHEMA_FILE } from '../../src/graphql/print-schema.ts';

describe('schema/schema.graphql', () => {
  it('is the printed Pothos schema (run `npm run print-schema` after changing src/graphql)', () => {
    expect(fs.readFileSync(SCHEMA_FILE, 'utf8')).toBe(printedSchema());
  });

  it('keeps the contract names of DESIGN §7', () => {
    const sdl = printedSchema();
    for (const name of ['session(id: ID!): Session', 'sessions(', 'node(id: ID!): Node', 'eventCount: Int!', 'turnCount: Int!',
      'forkedAtSeq: Int', 'inheritedEventCount: Int!', 'firstLiveSeq: Int!', 'inherited: Boolean!', 'synthetic: Boolean!',
      'forkSession(input: ForkSessionInput!): ForkSessionPayload!', 'branchSession(input: BranchSessionInput!): ForkSessionPayload!',
      'createSession(input: CreateSessionInput!): Session!', 'cutSeq: Int!', 'syntheticEvents: [Event!]!',
      'status: SessionStatus): SessionConnection!', 'last: Int): SessionConnection!', '): EventConnection!',
      'cancelTurn(sessionId: ID!): Session!', 'importRecording(recording: String!): Session!', 'recording: String!',
      'sendMessage(input: SendMessageInput!): SendMessagePayload!', 'pendingInputs: [PendingInput!]!', 'turns: [Turn!]!',
      'sessionEvents(afterSeq: Int, sessionId: ID!): Event!', 'sessionTurns(sessionId: ID!): TurnUpdate!', 'sessionsChanged: Session!']) {
      expect(sdl).toContain(name);
    }
  });
});
