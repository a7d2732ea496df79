import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of the test PostgreSQL, so a test can cut the connections that go through
 * it (and only those) at a moment it chooses: `stop()` closes the listening socket and destroys
 * every connection, so clients see the drop at once and reconnects are refused; `start()` listens
 * again on the same port.
 */
export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private boundPort = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** A started proxy to the host and port of `url` (a postgres:// URL), on a free local port. */
  static async forUrl(url: string): Promise<TcpProxy> {
    const u = new URL(url);
    const proxy = new TcpProxy(u.hostname || '127.0.0.1', Number(u.port || 5432));
    await proxy.start();
    return proxy;
  }

  get port(): number {
    return this.boundPort;
  }

  /** `url` with its host and port replaced by the proxy's. */
  urlThrough(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.boundPort);
    return u.toString();
  }

  /** Listens (again, on the same port once one was chosen). */
  async start(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      this.sockets.add(client).add(upstream);
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.boundPort, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.boundPort = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and destroys every proxied connection; resolves once the server is closed. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await closed;
  }
}
