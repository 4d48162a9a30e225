// The second article's code, as its readers wrote it; only the line that
// imports Redlock changed. Ports and the business functions come from the test.
const Redis = require('ioredis');
const Redlock = require('lockdog/redlock');
const [p1, p2, p3] = process.env.REDIS_PORTS.split(',').map(Number);
const log = (event, extra = {}) => console.log(JSON.stringify({ event, ...extra }));
const deductStock = async (orderId) => log('deduct', { orderId });
const longRunningTask = async (orderId) => {
  log('long-start', { orderId });
  await new Promise(r => setTimeout(r, Number(process.env.LONG_TASK_MS)));
  log('long-end', { orderId });
};

const clients = [
new Redis({ host: '127.0.0.1', port: p1 }),
new Redis({ host: '127.0.0.1', port: p2 }),
new Redis({ host: '127.0.0.1', port: p3 }),
];
const redlock = new Redlock(clients, {
driftFactor: 0.01,
retryCount: 10,
retryDelay: 200,
retryJitter: 100,
});
redlock.on('error', (err) => {
console.error('redlock error', err);
});

async function processOrder(orderId) {
const resource = ['locks:order:' + orderId];
let lock = null;
try {
lock = await redlock.acquire(resource, 5000);
console.log('获取锁成功');
// 执行业务，如扣库存、写订单
await deductStock(orderId);
} catch (err) {
console.error('加锁失败或业务异常', err);
} finally {
if (lock) {
try {
await lock.release();
} catch (releaseErr) {
console.error('释放锁失败', releaseErr);
}
}
}
}

async function processLongTask(orderId) {
const resource = ['locks:order:' + orderId];
let lock = null;
let extender = null;
try {
lock = await redlock.acquire(resource, 2000);
extender = setInterval(async () => {
try {
lock = await lock.extend(2000);
console.log('锁已续期');
} catch (err) {
console.error('续期失败', err);
}
}, 1000);
await longRunningTask(orderId);
} finally {
if (extender) clearInterval(extender);
if (lock) {
try {
await lock.release();
} catch (err) {
console.error('释放锁失败', err);
}
}
}
}

(async () => {
  await processOrder(1001);
  await processLongTask(1002);
  log('done');
  await Promise.all(clients.map(c => c.quit()));
})();
