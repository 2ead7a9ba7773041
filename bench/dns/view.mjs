// The bench's peers: p<i> at a mesh address of its own.
export const peer = (i, gen = 0) => ({
  id: `p${i}`,
  nodeKey: `key-${i}-${gen}`,
  addresses: [`100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}/32`],
  tags: ['g'],
  endpoints: [],
  inboundOnly: false,
});
export const address = (i) => peer(i).addresses[0].replace(/\/32$/, '');
