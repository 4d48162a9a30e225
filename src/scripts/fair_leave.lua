-- Takes token ARGV[1] out of a fair line (KEYS[1] the places by arrival,
-- KEYS[2] their leases): a waiter that stopped waiting (aborted, timed out,
-- gave up) no longer holds back those behind it. Returns 1 if it had a place.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
