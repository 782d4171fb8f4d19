# The next step of a pod with restartPolicy Always (a Deployment's) on the real cluster, as the
# kubesim kubelet takes it (kubesim/controllers/restarts.py), and when it is due:
# {"step": "start" | "ready" | "end" | "crashloop" | "restart" | "none", "due": ...}, `due` an
# RFC 3339 time or "0s" (at once). Every stage of serve-stages.yaml selects one step (so they
# never overlap) and waits until it is due; a start time is only known to the second.
#
# - start: a bound Pending pod whose images exist (a bad image is pulled as a Job pod's is);
# - ready: its containers turn ready KUBESIM_READY_AFTER_SECONDS (the largest; default 0) after
#   each start, unless they are due to end by then;
# - end: they end that long after each start: at once while the restart count is below the
#   pod's `kubesim.aicp.dev/oom-kills` annotation (OOMKilled), after KUBESIM_OOM_AFTER_SECONDS
#   (OOMKilled) or after KUBESIM_RUN_SECONDS (as KUBESIM_OOM and KUBESIM_EXIT_CODE say), the
#   first of these; with none of them, never;
# - restart: the first restart comes at once; crashloop: a later end waits in CrashLoopBackOff
#   10 s, then 20 s, 40 s, ... at most 300 s (by the restart count), then restarts.
def env_numbers($name): [.spec.containers[].env[]? | select(.name == $name) | .value | tonumber?];
def at($start; $seconds): ($start | fromdate) + ($seconds | ceil) | todate;
(.status.containerStatuses // []) as $statuses
| ($statuses[0] // {}) as $first
| ($first.restartCount // 0) as $restarts
| ((env_numbers("KUBESIM_READY_AFTER_SECONDS") | max) // 0) as $ready
| ((.metadata.annotations["kubesim.aicp.dev/oom-kills"] // "" | tonumber? | floor) // 0) as $kills
| ([if $restarts < $kills then 0 else empty end,
    (env_numbers("KUBESIM_OOM_AFTER_SECONDS") | min // empty),
    (env_numbers("KUBESIM_RUN_SECONDS") | min // empty)] | min) as $end
| if .spec.restartPolicy != "Always" or .metadata.deletionTimestamp != null
     or .status.phase == "Pending" and ([.spec.containers[].image | contains("does-not-exist")] | any)
  then {step: "none"}
  elif .status.phase == "Pending" then {step: "start"}
  elif .status.phase != "Running" or ($statuses | length) == 0 then {step: "none"}
  elif $statuses | all(.state.running != null) then
    (if $end != null and ($end <= $ready or ($statuses | all(.ready)))
     then {step: "end", due: at($first.state.running.startedAt; $end)}
     elif $statuses | all(.ready) then {step: "none"}
     else {step: "ready", due: at($first.state.running.startedAt; $ready)} end)
  elif $statuses | any(.state.terminated != null) then
    {step: (if $restarts == 0 then "restart" else "crashloop" end)}
  elif $statuses | any(.state.waiting.reason == "CrashLoopBackOff") then
    {step: "restart",
     due: at($first.lastState.terminated.finishedAt; [10 * pow(2; $restarts - 1), 300] | min)}
  else {step: "none"} end
| .due //= "0s"
