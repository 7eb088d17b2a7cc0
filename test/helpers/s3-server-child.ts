import { startS3Server } from './s3-server.js';

// The S3 server of `stoppableS3Server`, in a process of its own so that a test can stop it with
// SIGSTOP: prints its port, serves until its stdin ends.
const server = await startS3Server();
process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);
process.stdin.resume();
process.stdin.once('end', () => {
  void server.stop().then(() => process.exit(0));
});
