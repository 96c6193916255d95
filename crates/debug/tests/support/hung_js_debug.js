// A js-debug server (test double) whose program session hangs. As js-debug does, it listens on the socket path
// it is given; the first connection (the launcher) answers `initialize`, `launch` (sending the `startDebugging`
// request for the program's session, then `initialized`) and `configurationDone`; every later connection (the
// program's session) answers `initialize` only: its `launch` is never answered and no `initialized` comes.
// It writes its pid to `adapter.pid` beside this file. A program session's `launch` starts the program as js-debug
// does, in the server's process group (here `sleep`, its pid in `program.pid`), then writes `child-launch` (the
// bridge is then waiting for `initialized`).
const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');

fs.writeFileSync(path.join(__dirname, 'adapter.pid'), String(process.pid));
let connections = 0;
net.createServer((sock) => {
  const n = ++connections;
  let buf = Buffer.alloc(0);
  let seq = 0;
  const send = (msg) => {
    msg.seq = ++seq;
    const data = Buffer.from(JSON.stringify(msg));
    sock.write(`Content-Length: ${data.length}\r\n\r\n`);
    sock.write(data);
  };
  const respond = (req, body) =>
    send({ type: 'response', request_seq: req.seq, command: req.command, success: true, body: body || {} });
  sock.on('error', () => {});
  sock.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const m = /Content-Length:\s*(\d+)/i.exec(buf.subarray(0, end).toString());
      const len = Number(m[1]);
      if (buf.length < end + 4 + len) return;
      const req = JSON.parse(buf.subarray(end + 4, end + 4 + len).toString());
      buf = buf.subarray(end + 4 + len);
      if (req.type !== 'request') continue;
      if (req.command === 'initialize') {
        respond(req, { supportsConfigurationDoneRequest: true });
      } else if (n === 1 && req.command === 'launch') {
        send({ type: 'request', command: 'startDebugging',
          arguments: { request: 'launch', configuration: { type: 'pwa-node', name: 'program', __pendingTargetId: 't1' } } });
        respond(req);
        send({ type: 'event', event: 'initialized' });
      } else if (n === 1 && req.command === 'configurationDone') {
        respond(req);
      } else if (n > 1 && req.command === 'launch') {
        const program = spawn('sleep', ['600'], { stdio: 'ignore' });
        fs.writeFileSync(path.join(__dirname, 'program.pid'), String(program.pid));
        fs.writeFileSync(path.join(__dirname, 'child-launch'), '');
      }
    }
  });
}).listen(process.argv[2]);
