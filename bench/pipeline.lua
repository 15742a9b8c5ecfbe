-- bench/pipeline.lua — wrk sends DEPTH requests in one write on each
-- connection and waits for all DEPTH answers before the next write
-- (HTTP/1.1 pipelining):
--
--     wrk -t1 -c16 -d10s --latency -s bench/pipeline.lua URL -- 16
--
-- DEPTH defaults to 16. Each request is the one wrk would send without a
-- script (GET, the URL's path, its Host header). wrk counts every answer as
-- a request, so Requests/sec is answers per second.
--
-- wrk's latency figures are NOT valid with this script: wrk records one
-- latency per batch, then "corrects" the histogram for coordinated omission
-- with an expected interval computed per answer (runtime / (answers /
-- connections)), 1/DEPTH of the real interval between batches, which piles
-- synthetic samples onto it (its p99 can even print as 0). bench/run_loop
-- measures the latency of pipelined batches with its own probe connection.

local depth = 16
local batch

init = function(args)
  depth = tonumber(args[1]) or depth
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  batch = table.concat(r)
end

request = function()
  return batch
end
