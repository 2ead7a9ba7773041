export { checkManifest, defaultPorts, fillSettings, renderModule, type CatalogueModule } from './manifest.js';
