// `quotafed/service`: one region's service for embedders: the region's resilient engine on its Redis
// (`createRegionEngine`), and the whole service with its listeners, federation, gRPC and dashboard
// (`startRegionService`). This entry loads all of it.
export {
  createRegionEngine,
  startRegionService,
  type RegionEngine,
  type RegionService,
  type RegionServiceOptions,
} from '../service.ts';
export type { AdminRoutes } from '../http/admin.ts';
