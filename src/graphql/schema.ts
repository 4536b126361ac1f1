import { builder } from './builder.ts';
import './types/session.ts';
import './types/event.ts';
import './types/mutations.ts';
import './types/deletion.ts';
import './types/agent.ts';
import './types/family.ts';
import './types/recordings.ts';
import './types/subscriptions.ts';
import './types/search.ts';
import './types/models.ts';
import './types/tools.ts';
import './types/instructions.ts';
import './types/tool-approval.ts';
import './types/api-tokens.ts';
import './types/compaction.ts';
import './types/runners.ts';

export const schema = builder.toSchema({ sortSchema: false });
