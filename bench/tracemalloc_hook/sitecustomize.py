import os
if os.environ.get("TW_TRACE"):
    import signal, time, tracemalloc
    tracemalloc.start(4)
    def _dump(sig, frame):
        tracemalloc.take_snapshot().dump(os.environ["TW_TRACE"] + ".%d" % int(time.time() * 1000))
    signal.signal(signal.SIGUSR2, _dump)
