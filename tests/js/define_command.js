// ioredis's defineCommand (EVALSHA with an EVAL fallback on NOSCRIPT, in
// pipelines too) against the server on the port given; prints what it saw.
const Redis = require('ioredis');
const port = Number(process.argv[2]);
(async () => {
  const r = new Redis({ port, maxRetriesPerRequest: 1 });
  r.defineCommand('incrCapped', {
    numberOfKeys: 1,
    lua: "local v = redis.call('incr', KEYS[1]) if v > tonumber(ARGV[1]) then redis.call('set', KEYS[1], ARGV[1]) return tonumber(ARGV[1]) end return v",
  });
  r.defineCommand('getPair', {
    numberOfKeys: 2,
    lua: "return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}",
  });
  const out = [];
  await r.del('c', 'a', 'b');
  for (let i = 0; i < 4; i++) out.push(await r.incrCapped('c', 3));
  await r.set('a', 'x');
  await r.set('b', 'y');
  out.push(await r.getPair('a', 'b'));
  out.push(await r.pipeline().incrCapped('c', 10).getPair('a', 'missing').exec());
  // The script cache emptied: the next call falls back to EVAL.
  await r.script('FLUSH');
  out.push(await r.incrCapped('c', 100));
  try {
    await r.eval("return redis.error_reply('MY error')", 0);
  } catch (e) {
    out.push(e.message);
  }
  console.log(JSON.stringify(out));
  r.disconnect();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
