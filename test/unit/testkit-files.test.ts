// @meshp/testkit's file-store suite, run against files-local as a plugin author runs it against theirs.
import t from 'tap';
import { fileStoreConformance } from '@meshp/testkit';
import { LocalFilesPlugin } from '@meshp/files-local';

fileStoreConformance(t, { plugin: () => new LocalFilesPlugin() });
