export { checkManifest, defaultPorts, renderModule, type CatalogueModule } from './manifest.js';
