"""What one loopback round trip costs between two CPUs, against two processes on one CPU.

    python bench/pingpong.py 0 1    # sender on CPU 0, echoer on CPU 1
    python bench/pingpong.py 0 0    # both on CPU 0

On the benchmark VM a cross-CPU ping-pong costs ~90 us of wall time and 35-40 us of
the sender's CPU per send+recv (waking a sleeping peer on another CPU is an
inter-processor interrupt, expensive under virtualization), against ~20 us and 10 us on
one CPU. The gateway benchmark's topology (gateway on CPU 0, backend and load generator on
CPU 1) pays this on every request; see writes.py and docs/benchmarks.md.
"""

import os, socket, sys, time
N = 20000
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
port = srv.getsockname()[1]
cpu_a, cpu_b = int(sys.argv[1]), int(sys.argv[2])
pid = os.fork()
if pid == 0:
    os.sched_setaffinity(0, {cpu_b})
    c = socket.create_connection(("127.0.0.1", port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(4096)
        if not d: break
        c.send(d)
    os._exit(0)
os.sched_setaffinity(0, {cpu_a})
s, _ = srv.accept(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(1000): s.send(b"x" * 200); s.recv(4096)
t = time.perf_counter(); c0 = time.process_time()
for _ in range(N): s.send(b"x" * 200); s.recv(4096)
wall = (time.perf_counter() - t) / N * 1e6; cpu = (time.process_time() - c0) / N * 1e6
print(f"cpus {cpu_a}->{cpu_b}: round trip {wall:.1f} us wall, {cpu:.1f} us CPU in the sender per send+recv")
s.close(); os.waitpid(pid, 0)
