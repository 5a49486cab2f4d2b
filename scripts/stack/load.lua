-- SPDX-License-Identifier: MIT
-- load.lua — wrk script: a mix of the webapp's three request classes, each connection
-- thinking between requests (exponential, mean THINK_MS) like the paper's emulated users,
-- and going idle at STOP_AT (epoch s) so that no request is cut off when wrk exits.
local think_ms = tonumber(os.getenv("THINK_MS") or "100")
local stop_at = tonumber(os.getenv("STOP_AT") or "0")
local words = {"a", "b", "c", "st", "th", "re", "an", "lo"}

local threads = 0

function setup(thread)
    threads = threads + 1
    thread:set("id", threads)
end

function init(args)
    -- Each wrk thread has its own Lua state; give each its own random sequence.
    math.randomseed(os.time() * 100 + (tonumber(wrk.thread:get("id")) or 0))
end

function delay()
    if stop_at > 0 and os.time() >= stop_at then
        return 3600000
    end
    return -think_ms * math.log(1 - math.random())
end

function request()
    local r = math.random()
    local path
    if r < 0.6 then
        path = "/app/story?id=" .. math.random(1, 2000)
    elseif r < 0.85 then
        path = "/app/list"
    else
        path = "/app/search?q=" .. words[math.random(#words)]
    end
    return wrk.format("GET", path)
end
