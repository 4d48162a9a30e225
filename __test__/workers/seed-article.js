// The first article's usage, as its readers wrote it; only the line that
// imports DistributedLock/withLock changed (it used to define them by hand).
const Redis = require('ioredis');
const { DistributedLock, withLock } = require('lockdog');

const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT) });
const TTL = Number(process.env.LOCK_TTL);
const JOB_MS = Number(process.env.JOB_MS);

(async () => {
  await withLock(redis, 'order:1001:pay', async () => {
    console.log(JSON.stringify({ event: 'paying' }));
    await new Promise(r => setTimeout(r, JOB_MS));
  }, TTL);

  const lock = new DistributedLock(redis, 'order:1001:refund', TTL);
  if (!await lock.acquire()) {
    throw new Error('获取锁失败：order:1001:refund');
  }
  console.log(JSON.stringify({ event: 'refund-locked', token: lock.token }));
  await new Promise(r => setTimeout(r, JOB_MS));
  await lock.release();
  console.log(JSON.stringify({ event: 'done' }));
  redis.disconnect();
})();
