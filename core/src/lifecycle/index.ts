export { buildPreview, type ConvergePreview, type PreviewItem, type PreviewInputs, type AfterFlip } from './preview.js';
export { flip, previewConverge, returnToAdopted, MODE_KEY, type FlipResult, type RetiredRecord, type Progress } from './flip.js';
export { checkGenesis, type GenesisFacts, type GenesisFinding, type GenesisInput } from './genesis-checks.js';
