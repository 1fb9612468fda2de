# The reference client's python round trip: Jupyter's own Python client (jupyter_client) runs
# `1+1` on a kernel it started itself, timed from execute_request until both the execute_reply
# and the kernel's "idle" status for that request have arrived (what ship waits for too).
# Usage: python3 refclient.py WARMUP REPS; prints a JSON list of milliseconds.
import json
import sys
import time

from jupyter_client.manager import start_new_kernel

warmup, reps = int(sys.argv[1]), int(sys.argv[2])
km, kc = start_new_kernel(kernel_name="python3", extra_arguments=["--HistoryManager.enabled=False"])
try:
    def once():
        t0 = time.perf_counter()
        msg_id = kc.execute("1+1")
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") != msg_id or reply["content"]["status"] != "ok":
            raise SystemExit("unexpected reply: %r" % (reply["content"],))
        while True:
            m = kc.get_iopub_msg(timeout=30)
            if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                    and m["content"]["execution_state"] == "idle"):
                break
        return (time.perf_counter() - t0) * 1000.0

    for _ in range(warmup):
        once()
    print(json.dumps([once() for _ in range(reps)]))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
