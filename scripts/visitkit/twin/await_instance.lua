-- Cloud Run holds a request while an instance starts for it, up to the queue wait
-- (https://cloud.google.com/run/docs/about-instance-autoscaling, read 2026-11-28). HAProxy alone answers
-- at once when a backend has no server UP, so an autoscaled backend's requests pass through here first:
-- with no instance UP they wait (counted in `waiting`, which the autoscaler reads with `show waiting`)
-- until the autoscaler has started one, or the wait is over and HAProxy answers its 503 (the twin's 429).
-- Once an instance is UP, HAProxy's own queue (timeout queue) holds requests that find every slot busy.
waiting = {}     -- backend -> requests waiting for an instance now
wait_ms = {}     -- backend -> how long one may wait, as the autoscaler last set it (`set queue-wait B MS`)

local STEP_MS = 50

local function usable(backend)
  for _, server in pairs(backend.servers) do
    if string.sub(server:get_stats()["status"], 1, 2) == "UP" then
      return true
    end
  end
  return false
end

core.register_action("await_instance", {"http-req"}, function(txn, default_ms)
  local name = txn.f:be_name()
  local backend = core.backends[name]
  if usable(backend) then
    return
  end
  local left = wait_ms[name] or tonumber(default_ms)
  waiting[name] = (waiting[name] or 0) + 1
  while left > 0 and not usable(backend) do
    core.msleep(STEP_MS)
    left = left - STEP_MS
  end
  waiting[name] = waiting[name] - 1
end, 1)

core.register_cli({"show", "waiting"}, "show waiting : requests waiting for an instance, per backend",
  function(applet)
    for name, count in pairs(waiting) do
      applet:send(name .. " " .. count .. "\n")
    end
  end)

core.register_cli({"set", "queue-wait"}, "set queue-wait <backend> <ms> : how long a request waits for an instance",
  function(applet, name, ms)
    wait_ms[name] = tonumber(ms)
  end)
