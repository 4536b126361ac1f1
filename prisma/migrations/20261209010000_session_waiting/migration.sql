-- AlterEnum: a turn waiting for a tool call's approval (docs/contract.md#tool-approval)
ALTER TYPE "SessionStatus" ADD VALUE 'WAITING';
