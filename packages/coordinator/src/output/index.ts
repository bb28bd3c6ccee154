// Sessions' output: kept in Redis beside the session, read in pages, followed live.
export {
  OutputStore,
  MAX_OUTPUT_PAGE,
  compareLineIds,
  isLineId,
  type OutputKeeping,
  type OutputLine,
  type OutputPage,
  type OutputStream,
} from './output-store.js';
export { OutputFeed, OutputFollower, type OutputFeedOptions } from './output-feed.js';
