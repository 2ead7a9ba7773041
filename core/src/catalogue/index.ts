export { checkManifest, defaultPorts, fillSettings, missingSettings, renderModule, settingsNamed, type CatalogueModule } from './manifest.js';
