// The AI SDK adapter with ai 6 and @ai-sdk/openai 3, the SDK the repository
// installs (the cases: ai-sdk-majors.ts; ai 7: ai-sdk-v7.test.ts).
import { aiSdkMajorCases } from './ai-sdk-majors.ts';

aiSdkMajorCases(6);
