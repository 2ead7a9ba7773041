import t from 'tap';
import { LABEL_MODULE, LABEL_NODE, LABEL_SPEC_HASH, type ContainerSpec } from '@meshp/core';
import { containerSpecHash } from '@meshp/core/reconcile';
import { canonicalJson, createOptions, portsFromInspect, portsFromList, specHash } from '@meshp/runtime-docker';

const mark = { node: 'n1', module: 'site', specHash: 'h1' };

t.test('a spec becomes a create request labelled with the mark', async (t) => {
  const spec: ContainerSpec = {
    name: 'web',
    image: 'lab/busybox:1',
    command: ['httpd', '-f', '-p', '80'],
    env: { B: '2', A: '1' },
    ports: [
      { container: 80, host: 8080 },
      { container: 53, host: 5353, protocol: 'udp' },
    ],
    mounts: [
      { source: '/srv/www', target: '/www', readOnly: true },
      { source: '/srv/log', target: '/log' },
    ],
    restart: 'unless-stopped',
  };
  t.same(createOptions(spec, mark), {
    name: 'web',
    Image: 'lab/busybox:1',
    Cmd: ['httpd', '-f', '-p', '80'],
    Env: ['A=1', 'B=2'],
    Labels: { [LABEL_MODULE]: 'site', [LABEL_SPEC_HASH]: 'h1', [LABEL_NODE]: 'n1' },
    ExposedPorts: { '80/tcp': {}, '53/udp': {} },
    HostConfig: {
      PortBindings: { '80/tcp': [{ HostPort: '8080' }], '53/udp': [{ HostPort: '5353' }] },
      Binds: ['/srv/www:/www:ro', '/srv/log:/log'],
      RestartPolicy: { Name: 'unless-stopped' },
    },
  });
});

t.test('a container port published on several host ports is bound on each', async (t) => {
  const spec: ContainerSpec = {
    name: 'web',
    image: 'i',
    ports: [
      { container: 80, host: 8080 },
      { container: 80, host: 8081 },
    ],
  };
  t.same(createOptions(spec, mark).HostConfig?.PortBindings, { '80/tcp': [{ HostPort: '8080' }, { HostPort: '8081' }] });
});

t.test('without a command or restart policy the image defaults stand', async (t) => {
  const o = createOptions({ name: 'web', image: 'i' }, mark);
  t.notOk('Cmd' in o);
  t.notOk('RestartPolicy' in (o.HostConfig ?? {}));
});

t.test('a spec the engine would misread is refused before the engine is asked', async (t) => {
  const bad: Array<[string, ContainerSpec]> = [
    ['relative mount source (a named volume)', { name: 'web', image: 'i', mounts: [{ source: 'data', target: '/data' }] }],
    ['colon in a mount path', { name: 'web', image: 'i', mounts: [{ source: '/a:b', target: '/data' }] }],
    ['port out of range', { name: 'web', image: 'i', ports: [{ container: 80, host: 70000 }] }],
    ['invalid name', { name: '/web', image: 'i' }],
    ['one-character name', { name: 'w', image: 'i' }],
    ['no image', { name: 'web', image: '' }],
  ];
  for (const [why, spec] of bad) t.throws(() => createOptions(spec, mark), { code: 'MESHP_DECLARATION_INVALID' }, why);
});

t.test('the spec hash is the same for the same spec whatever its key order, and differs for any change', async (t) => {
  const a: ContainerSpec = { name: 'web', image: 'i', env: { A: '1', B: '2' }, ports: [{ container: 80, host: 8080 }] };
  const b = { ports: [{ host: 8080, container: 80 }], env: { B: '2', A: '1' }, image: 'i', name: 'web', command: undefined } as ContainerSpec;
  t.equal(specHash(a), specHash(b));
  t.match(specHash(a), /^[0-9a-f]+$/);
  t.equal(specHash(a), containerSpecHash(a), 'the reconciler computes the same hash');
  t.not(specHash(a), specHash({ ...a, env: { A: '1', B: '3' } }));
  t.not(specHash(a), specHash({ ...a, ports: [{ container: 80, host: 8081 }] }));
  t.not(specHash(a), specHash({ ...a, command: ['x'] }));
  t.equal(canonicalJson({ b: [1, { d: 2, c: undefined }], a: null }), '{"a":null,"b":[1,{"d":2}]}');
});

t.test('a list entry and an inspect document read as the same published ports', async (t) => {
  const fromList = portsFromList('web', [
    { IP: '::', PrivatePort: 80, PublicPort: 8080, Type: 'tcp' },
    { IP: '0.0.0.0', PrivatePort: 80, PublicPort: 8080, Type: 'tcp' },
    { IP: '', PrivatePort: 443, PublicPort: 0, Type: 'tcp' }, // exposed, not published
    { IP: '0.0.0.0', PrivatePort: 9, PublicPort: 9, Type: 'sctp' },
  ]);
  const fromInspect = portsFromInspect('web', {
    '80/tcp': [
      { HostIp: '0.0.0.0', HostPort: '8080' },
      { HostIp: '::', HostPort: '8080' },
    ],
    '443/tcp': null,
    '9/sctp': [{ HostIp: '0.0.0.0', HostPort: '9' }],
  });
  t.same(fromList, fromInspect);
  t.same(fromList, [
    { container: 'web', containerPort: 80, hostPort: 8080, hostIp: '0.0.0.0', protocol: 'tcp' },
    { container: 'web', containerPort: 80, hostPort: 8080, hostIp: '::', protocol: 'tcp' },
  ]);
});
