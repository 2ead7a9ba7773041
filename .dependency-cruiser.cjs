// The import graph's rules, checked by `make lint` (depcruise): the layout docs/architecture.md
// describes, held by the code. Cruised: the sources of core, lib/*, plugins/*, bin and examples/*
// (tests and generated code may import across, and are left out).
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A circle of imports (type-only ones too) makes two files one concept: split out what both need.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-sibling-plugin',
      severity: 'error',
      comment: 'A plugin is written against core (and lib/) alone; what two plugins share belongs in core or lib/.',
      from: { path: '^plugins/([^/]+)/' },
      to: { path: '^plugins/', pathNot: '^plugins/$1/' },
    },
    {
      name: 'core-imports-no-package',
      severity: 'error',
      comment: 'Core is the bottom floor: it imports no plugin, no lib package and not the CLI.',
      from: { path: '^core/' },
      to: { path: '^(plugins|lib|bin|examples)/' },
    },
    {
      name: 'core-does-no-io',
      severity: 'error',
      comment: "Core does no I/O: files, processes and sockets are the plugins' (private state files: lib/state-files). node:net is allowed for isIP alone.",
      from: { path: '^core/' },
      to: { dependencyTypes: ['core'], path: '^(node:)?(fs|fs/promises|child_process|dgram|http|https|http2|tls|worker_threads)$' },
    },
    {
      name: 'contract-imports-no-implementation',
      severity: 'error',
      comment: "The contract room names shapes: it imports only the contract, the delta protocol's records and tapable's types.",
      from: { path: '^core/src/contract/' },
      to: { path: '^core/src/', pathNot: '^core/src/(contract/|delta/controller/records\\.ts$|errors\\.ts$)' },
    },
    {
      name: 'lib-imports-only-core',
      severity: 'error',
      comment: 'A lib package is shared by plugins and the CLI: it imports core and other lib packages, never a plugin or the CLI.',
      from: { path: '^lib/' },
      to: { path: '^(plugins|bin|examples)/' },
    },
    {
      name: 'plugins-import-no-cli',
      severity: 'error',
      comment: 'The CLI assembles plugins; a plugin never reaches up into it.',
      from: { path: '^(plugins|lib)/' },
      to: { path: '^bin/' },
    },
    {
      name: 'admin-commands-stay-light',
      severity: 'error',
      comment:
        "An admin command is one call to a controller: it loads the gRPC client and the controller's light entry (@meshp/controller/client), never the controller itself (its store, console: fastify) nor a host plugin (Docker's client, nft), which would make every scripted call start several times slower.",
      from: { path: '^bin/src/commands/(node|token|policy|network|route|relay|dns|audit|admin|module|catalogue|module-untake)[.]ts$' },
      to: { path: '^plugins/(controller/dist/index|runtime-docker/|firewall-nftables/|firewall-iptables/|state-sqlite/)', reachable: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.tap.json' },
    doNotFollow: { path: ['node_modules', '(^|/)dist/'] },
    exclude: { path: ['(^|/)gen/', '(^|/)test/'] },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'types', 'default'], extensions: ['.ts', '.js', '.d.ts'] },
    moduleSystems: ['es6'],
  },
};
